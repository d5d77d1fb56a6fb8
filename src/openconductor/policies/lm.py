"""The LM conductor: a language model that writes the workflow.

The prompt (``conductor_messages``) is shared with the trainer, so a trained model drops into the
runtime unchanged. On backends that take a GBNF grammar (in-process llama.cpp) decoding is
constrained so the three lists always parse, with their lengths tied together; elsewhere a parse
failure is resampled up to ``max_attempts`` and then a declared fallback runs (the trace says so).
"""

from __future__ import annotations

import time
from typing import Optional

from ..pool import PoolSpec, WorkerCallError
from ..records import PlanRecord, Usage
from ..workflow import Step, Workflow, WorkflowError, parse_and_validate
from .base import Plan, PlanRequest, Policy, Previous, register_policy

SYSTEM = """You are the Conductor: you coordinate a pool of AI agents (language models) to solve a task.
You do not solve the task yourself. You write a workflow of at most {max_steps} steps. Each step gives one agent
one subtask, written as a clear natural-language instruction, and an access list that says which earlier
steps' subtasks and responses that agent sees:
- "all": it sees every earlier step;
- []: it sees no earlier step, only the overall task;
{fine_grained}The steps run in order; the response of the LAST step is the final answer, so the last step must give it.
Use few steps for simple questions (one strong agent is often enough) and more for hard ones
(e.g. plan -> implement -> verify). Each agent sees the overall task.

The agents in the pool:
{pool}

First write one short line of reasoning, then exactly three Python lists of equal length:
model_id = [agent ids]
subtasks = ["instruction", ...]
access_list = [access of each step, e.g. [] or ["all"]{fine_example}]"""

EXAMPLES = """Example 1 (a question about history, pool of 3 agents):
Reasoning: a recall question; one strong agent answers, a second checks it.
model_id = [1, 2]
subtasks = ["Answer the question concisely and state the final answer.", "Check the previous answer for factual errors and give the corrected final answer."]
access_list = [[], ["all"]]

Example 2 (a programming problem, pool of 3 agents):
Reasoning: hard code; design first, then implement, then review.
model_id = [0, 2, 1]
subtasks = ["Design an efficient algorithm for the problem and explain it step by step.", "Implement the algorithm described by the previous agent in Python.", "Review the implementation, fix any bug, and output the final code."]
access_list = [[], ["all"], ["all"]]"""

RECURSION = """This is a verification round. Earlier agents already produced this answer:
<previous answer>
{answer}
</previous answer>
{instruction}If the answer is correct and complete, accept it by writing three empty lists:
model_id = []
subtasks = []
access_list = []
Otherwise write a new workflow that verifies or revises it."""


def describe_pool(spec: PoolSpec, show: str = "ids") -> str:
    """The pool as the conductor sees it: ordinal ids by default, so it learns strengths from reward."""
    lines = []
    for i, worker in enumerate(spec.workers):
        line = f"Model id {i}"
        if worker.provider == "conductor":
            line += " (yourself: a recursive round that sees the answer so far and may verify or revise it)"
        elif show in ("names", "descriptions"):
            line += f": {worker.name}"
            if show == "descriptions" and worker.description:
                line += f" — {worker.description}"
        lines.append(line)
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
) -> list[dict[str, str]]:
    system = SYSTEM.format(
        max_steps=max_steps,
        pool=describe_pool(spec, show),
        fine_grained='- a list of earlier step indices, e.g. [0, 2]: it sees those steps only.\n' if fine_grained else "",
        fine_example=" or [0, 1]" if fine_grained else "",
    )
    if examples:
        system += "\n\n" + EXAMPLES
    user = f"Overall task:\n{question}"
    if previous is not None:
        instruction = f"Your instruction from the outer workflow: {previous.instruction}\n" if previous.instruction else ""
        user += "\n\n" + RECURSION.format(answer=previous.answer or "(empty)", instruction=instruction)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def workflow_grammar(n_workers: int, max_steps: int, *, allow_empty: bool = False, fine_grained: bool = False) -> str:
    """GBNF that only admits a reasoning line and three lists of one shared length n = 1..max_steps.

    GBNF cannot tie list lengths together by itself, so the grammar enumerates one alternative per n.
    """
    ids = " | ".join(f'"{i}"' for i in range(n_workers))
    rules = [
        'root ::= "Reasoning: " reason "\\n" lists',
        "reason ::= [^\\n]{1,240}",
        f"id ::= {ids}",
        'str ::= "\\"" [^"\\\\\\n]{3,240} "\\""',
        'acc0 ::= "[]"',
    ]
    alts = []
    if allow_empty:
        alts.append("l0")
        rules.append('l0 ::= "model_id = []\\nsubtasks = []\\naccess_list = []"')
    for k in range(1, max_steps):
        options = ['"[]"', '"[\\"all\\"]"']
        if fine_grained:
            idx = " | ".join(f'"{j}"' for j in range(k))
            rules.append(f"idx{k} ::= {idx}")
            options.append(f'"[" idx{k} (", " idx{k})* "]"')
        rules.append(f"acc{k} ::= {' | '.join(options)}")
    for n in range(1, max_steps + 1):
        alts.append(f"l{n}")
        id_list = ' ", " '.join(["id"] * n)
        str_list = ' ", " '.join(["str"] * n)
        acc_list = ' ", " '.join(f"acc{k}" for k in range(n))
        rules.append(
            f'l{n} ::= "model_id = [" {id_list} "]\\nsubtasks = [" {str_list} "]\\naccess_list = [" {acc_list} "]"'
        )
    rules.insert(1, f"lists ::= {' | '.join(alts)}")
    return "\n".join(rules)


@register_policy("conductor")
class LMConductor(Policy):
    """Prompts the pool's conductor backend (or an explicit one) and parses its workflow."""

    name = "conductor"

    def __init__(self, temperature: Optional[float] = None, examples: bool = True, constrained: Optional[bool] = None):
        self.temperature = temperature
        self.examples = examples
        self.constrained = constrained  # None: use a grammar whenever the backend takes one

    async def plan(self, request: PlanRequest) -> Plan:
        pool, spec = request.pool, request.pool.spec
        options = spec.conductor
        backend = pool.conductor_backend()
        recursive = request.previous is not None
        messages = conductor_messages(
            request.question, spec, max_steps=request.max_steps, previous=request.previous, show=options.show,
            fine_grained=options.fine_grained_access, examples=self.examples,
        )
        use_grammar = backend.provider.supports_grammar if self.constrained is None else self.constrained
        grammar = (
            workflow_grammar(len(spec.workers), request.max_steps, allow_empty=recursive, fine_grained=options.fine_grained_access)
            if use_grammar
            else None
        )
        record = PlanRecord(policy=self.name)
        usage = Usage()
        start = time.perf_counter()
        temperature = options.temperature if self.temperature is None else self.temperature
        for attempt in range(1, options.max_attempts + 1):
            record.attempts = attempt
            try:
                seed = None if request.seed is None else request.seed + attempt
                completion, _ = await backend.call(messages, max_tokens=options.max_tokens, grammar=grammar, temperature=temperature, seed=seed)
            except WorkerCallError as exc:
                record.errors.append(f"backend_error: {exc}")
                continue
            usage = usage + completion.usage
            record.raw = completion.text
            try:
                workflow = parse_and_validate(completion.text, len(spec.workers), max_steps=request.max_steps, allow_empty=recursive)
            except WorkflowError as exc:
                record.errors.append(f"{exc.code}: {exc}")
                continue
            record.workflow, record.usage, record.latency_s = workflow.to_dict(), usage, time.perf_counter() - start
            return Plan(workflow, record)
        record.usage, record.latency_s = usage, time.perf_counter() - start
        return self._fallback(request, record)

    def fingerprint(self, pool: PoolSpec) -> dict:
        return {**super().fingerprint(pool), "conductor": pool.conductor.model_dump(mode="json")}

    def _fallback(self, request: PlanRequest, record: PlanRecord) -> Plan:
        spec = request.pool.spec
        choice = spec.conductor.fallback
        if request.previous is not None:
            # A verification round that cannot plan keeps the answer it was shown.
            record.fallback = "accept previous answer"
            return Plan(Workflow(()), record)
        if choice == "none":
            return Plan(None, record)
        named = spec.conductor.fallback_worker
        index = spec.index(named) if named is not None else spec.strongest_index()
        workflow = Workflow((Step(index, "Solve the overall task and give the final answer.", ()),), reasoning="fallback")
        record.fallback = f"single worker {spec.workers[index].name!r} after {record.attempts} failed attempt(s)"
        record.workflow = workflow.to_dict()
        return Plan(workflow, record)
