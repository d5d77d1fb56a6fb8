"""The conductor's prompt: the pool as it sees it (``describe_pool``), the round so far (``Previous``), the messages
it is sent (``conductor_messages``, shared by the runtime and the trainer, so a trained model drops into the runtime
unchanged) and the language it plans in under a grammar (``planning_format``, a trained checkpoint's names, rank
words and held wordings applied)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from ..evidence import evidence_lines
from ..records import StepRecord
from ..spec import RANKED_VIEWS, PoolConfigError, PoolSpec
from ..workflow import FormatGrammar, Step, Workflow, WorkflowFormat
from .checkpoint import held_wordings, trained_prompt
from .ranking import binding, ranking


@dataclass
class Previous:
    """What a recursive round sees: the answer so far and the steps its access list allows."""

    answer: str
    steps: list[StepRecord] = field(default_factory=list)
    instruction: str = ""  # the subtask the outer round gave the conductor step


SYSTEM = """You are the Conductor: you coordinate a pool of AI agents (language models) to solve a task.
You do not solve the task yourself. You write a workflow of at most {max_steps} steps. Each step gives one agent
one subtask, written as a clear natural-language instruction, and an access list that says which earlier
steps' subtasks and responses that agent sees:
- "all": it sees every earlier step;
- []: it sees no earlier step, only the overall task;
{fine_grained}The response of the LAST step is the final answer, so the last step must give it. Agents differ in
what they are good at: choose for each step the agent that suits it. Steps can plan, solve, check or revise
earlier work, or combine several independent answers.

The agents in the pool:
{pool}

{output}"""

# For a conductor trained to write its plans (`[prompt] style = "compact"`): the pool and the output's
# shape, without the paper's instructions, which a prompted model needs and a trained one has learned.
# On the offline pool (100 tokens of pool lines) the system prompt is 171 tokens against the paper's 333
# (487 with its few-shot examples).
COMPACT = """You are the Conductor: write a workflow of at most {max_steps} steps that solves the task with these agents.
The response of the last step is the final answer.

The agents in the pool:
{pool}

{output}"""

# Out-of-domain on purpose (the paper found out-of-domain examples better than in-domain ones); the ids
# are placeholders, not advice about any pool. Written by ``Workflow.render``, as the conductor must write.
_EXAMPLES = [
    ("translate a contract clause", Workflow((
        Step(1, "Translate the clause into French."),
        Step(0, "Check the translation above for errors and give the corrected final version.", "all"),
    ), reasoning="Reasoning: draft, then an independent check.")),
    ("plan a three-day itinerary", Workflow((
        Step(2, "Draft an itinerary."),
        Step(0, "Draft an itinerary."),
        Step(1, "Combine the drafts above into one final itinerary.", "all"),
    ), reasoning="Reasoning: two independent drafts, then one agent combines them.")),
]  # fmt: skip
EXAMPLES = "\n\n".join(f"Example {i} ({topic}):\n{workflow.render()}" for i, (topic, workflow) in enumerate(_EXAMPLES, 1))

RECURSION = """This is a verification round. Earlier agents already produced this answer:
<previous answer>
{answer}
</previous answer>
{evidence}{instruction}If the answer is correct and complete, accept it by writing three empty lists:
{accept}
Otherwise write a new workflow that verifies or revises it."""


def round_evidence(steps: list) -> str:
    """The round's steps, one line each with its verdict (evidence.py): what ran, what the examples said, who agrees."""
    return f"What the steps of that round did:\n{evidence_lines(steps)}\n" if steps else ""


def describe_pool(spec: PoolSpec, show: str = "ids") -> str:
    """The pool as the conductor sees it (``pool.PoolView``): ordinal ids ("ids", what a conductor trained from
    reward learns on), with names, or with names and descriptions (a worker without one is described by its model);
    "profile": the descriptions, then per area the workers ranked by their measured accuracy (``ranking``);
    "ranking": the names, then that ranking."""
    lines = []
    for i, worker in enumerate(spec.workers):
        line = f"Model id {i}"
        if worker.provider == "conductor":
            line += " (yourself: a recursive round that sees the answer so far and may verify or revise it)"
        elif show != "ids":
            line += f": {worker.name}"
            about = worker.description or (f"{worker.provider} model {worker.model}" if worker.model else f"a {worker.provider} tool")
            if show in ("descriptions", "profile"):
                line += f" — {about}"
        lines.append(line)
    if show in RANKED_VIEWS:
        lines += ranking(spec)
    return "\n".join(lines)


def conductor_messages(
    question: str,
    spec: PoolSpec,
    *,
    max_steps: int = 5,
    previous: Optional[Previous] = None,
    show: str = "ids",
    fine_grained: bool = True,
    examples: bool = True,
    style: str = "paper",
) -> list[dict[str, str]]:
    if style not in ("paper", "compact"):
        raise ValueError(f"unknown conductor prompt style {style!r}: use 'paper' or 'compact'")
    output = WorkflowFormat.instructions(style, fine_grained=fine_grained)
    if style == "compact":
        system = COMPACT.format(max_steps=max_steps, pool=describe_pool(spec, show), output=output)
    else:
        system = SYSTEM.format(
            max_steps=max_steps,
            pool=describe_pool(spec, show),
            fine_grained='- a list of earlier step indices, e.g. [0, 2]: it sees those steps only.\n' if fine_grained else "",
            output=output,
        )
    if examples:
        system += "\n\n" + EXAMPLES
    user = f"Overall task:\n{question}"
    if previous is not None:
        instruction = f"Your instruction from the outer workflow: {previous.instruction}\n" if previous.instruction else ""
        user += "\n\n" + RECURSION.format(answer=previous.answer or "(empty)", instruction=instruction, accept=WorkflowFormat.accept_lists(),
                                          evidence=round_evidence(previous.steps))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# (names, rank-word aliases, name slots, held wordings): what a trained checkpoint writes with
TrainedBinding = tuple[tuple[str, ...], tuple[tuple[str, int], ...], bool, tuple[str, ...]]


def trained_binding(spec: PoolSpec) -> TrainedBinding:
    """What the pool's trained checkpoint writes with: (names, rank-word aliases, name slots, held wordings);
    all empty without a checkpoint."""
    options = spec.conductor
    if not options.checkpoint:
        return (), (), False, ()
    names: tuple[str, ...] = ()
    aliases: tuple[tuple[str, int], ...] = ()
    name_slots = False
    if options.show != "ids":  # its ids follow the workers its reasoning names (and the ranking's words)
        trained = trained_prompt(options.checkpoint)
        names, aliases = binding(trained, spec)
        name_slots = bool(trained.name_slots)
    return names, aliases, name_slots, held_wordings(options)


def planning_format(spec: PoolSpec, max_steps: int, *, recursive: bool = False,
                    trained: Optional[TrainedBinding] = None) -> WorkflowFormat:
    """The language the pool's conductor plans in under a grammar: a trained checkpoint's names, rank words and
    held wordings applied (``trained``: ``trained_binding(spec)``, read already), every field bounded so that
    ``[conductor] max_tokens`` cannot cut a plan. A max_tokens too small for it is a PoolConfigError that names the
    least that fits."""
    options = spec.conductor
    return _bounded(spec.name, len(spec.workers), max_steps, options.max_tokens, recursive, options.fine_grained_access,
                    trained or trained_binding(spec))


def planning_grammar(spec: PoolSpec, max_steps: int, *, recursive: bool = False, trained: Optional[TrainedBinding] = None) -> FormatGrammar:
    """``planning_format(...).grammar()``, written once per format: every plan asks for it."""
    return _grammar(planning_format(spec, max_steps, recursive=recursive, trained=trained))


# Built once per pool shape and binding (plans ask again and again); a format error is raised each time, not cached.
@lru_cache(maxsize=64)
def _bounded(pool: str, workers: int, max_steps: int, max_tokens: int, recursive: bool, fine_grained: bool,
             trained: TrainedBinding) -> WorkflowFormat:
    names, aliases, name_slots, wordings = trained
    try:
        return WorkflowFormat.bounded(workers, max_steps, max_tokens, allow_empty=recursive, fine_grained=fine_grained, names=names,
                                      name_slots=name_slots, aliases=aliases, wordings=wordings)
    except ValueError as exc:  # a [conductor] max_tokens too small for max_steps, or for its longest wording
        raise PoolConfigError(f"pool {pool!r}: [conductor] {exc}") from None


@lru_cache(maxsize=64)
def _grammar(fmt: WorkflowFormat) -> FormatGrammar:
    return fmt.grammar()
