"""The LM conductor: a language model that writes the workflow.

The prompt (``conductor_messages``) is shared with the trainer, so a trained model drops into the
runtime unchanged. On backends that take a GBNF grammar (in-process llama.cpp) decoding is
constrained so the three lists always parse, with their lengths tied together; elsewhere a parse
failure is resampled up to ``max_attempts`` and then a declared fallback runs (the trace says so).
"""

from __future__ import annotations

import asyncio
import time
from typing import Optional

from ..budget import LimitReached
from ..pool import RANKED_VIEWS, PoolConfigError, PoolSpec, WorkerCallError
from ..records import FamiliarityCheck, PlanRecord, Usage
from ..workflow import Step, Workflow, WorkflowError, WorkflowFormat, parse_and_validate
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, Previous, register_policy
from .baselines import SOLVE
from .familiar import FamiliarityError, pool_familiarity

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
    from ..evidence import evidence_lines

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


RANKED = 3  # workers named per area: the choice is among the best few, and the prompt stays short


def ranking(spec: PoolSpec) -> list[str]:
    """Per area, the workers with the best measured accuracy first ("math: atlas-pro 86, euclid-14b 84, ..."):
    a small conductor copies a name from a list far more reliably than it compares prose across workers."""
    ranked = ranked_by_area(spec)
    if not ranked:
        return []
    return ["Measured accuracy alone, best first:"] + [
        f"{area}: " + ", ".join(f"{spec.workers[i].name} {round(100 * a)}" for a, i in best) for area, best in ranked.items()]


def rank_aliases(spec: PoolSpec) -> tuple[tuple[str, int], ...]:
    """Words that name a worker by its place in ``ranking`` ("math#1": the best in math, "quantitative#2"),
    with the id each names: a conductor that writes them picks by what the pool measured, whatever its workers are called."""
    ranked = ranked_by_area(spec)
    keys = area_keys(list(ranked))
    return tuple((f"{keys[area]}#{k}", i) for area, best in ranked.items() for k, (_, i) in enumerate(best, 1))


def area_keys(areas: list[str]) -> dict[str, str]:
    """One word per area for ``rank_aliases``: its first word ("quantitative" for "quantitative reasoning"), or the
    whole area hyphenated where two areas share a first word."""
    firsts = [a.split()[0] if a.split() else a for a in areas]
    return {a: f if firsts.count(f) == 1 else "-".join(a.split()) for a, f in zip(areas, firsts)}


def ranked_by_area(spec: PoolSpec, top: Optional[int] = RANKED) -> dict[str, list[tuple[float, int]]]:
    """Per area (in the order the profiles name them), the ``top`` best (accuracy, id) (None: all), ties in pool order:
    the one ranking rule behind the prompt's lines, the rank aliases and the simulated rank lookup (``sim.pools.area_ranking``)."""
    profiles = [(i, w.profile or _measured(w)) for i, w in enumerate(spec.workers) if w.provider != "conductor"]
    areas = dict.fromkeys(a for _, p in profiles for a in p)
    return {area: sorted(((p[area], i) for i, p in profiles if area in p), key=lambda t: -t[0])[:top] for area in areas}


def binding(prompt, spec: PoolSpec) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """The words a trained conductor's ids are bound to on ``spec`` (``prompt``: its ``PromptSettings`` or manifest
    ``PromptInfo``): the workers' names when its ids follow the names its reasoning gives, and with
    ``rank_aliases`` the ranking's words too; nothing for a conductor that writes ids."""
    if not prompt.ids_follow_names or prompt.show == "ids":
        return (), ()
    return tuple(w.name for w in spec.workers), (rank_aliases(spec) if prompt.rank_aliases else ())


def _measured(worker) -> dict[str, float]:
    if worker.provider != "simulated":
        return {}
    from ..sim.pools import measured_profile  # a simulated worker is measured in the world that answers it

    return measured_profile(worker)


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
    from ..providers.transformers_local import held_wordings, trained_prompt

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
    names, aliases, name_slots, wordings = trained or trained_binding(spec)
    options = spec.conductor
    try:
        return WorkflowFormat.bounded(len(spec.workers), max_steps, options.max_tokens, allow_empty=recursive,
                                      fine_grained=options.fine_grained_access, names=names, name_slots=name_slots, aliases=aliases,
                                      wordings=wordings)
    except ValueError as exc:  # a [conductor] max_tokens too small for max_steps, or for its longest wording
        raise PoolConfigError(f"pool {spec.name!r}: [conductor] {exc}") from None


class ConductorOptions(PolicyOptions):
    temperature: Optional[float] = None  # None: the pool's [conductor] temperature
    examples: Optional[bool] = None  # None: as the pool's trained conductor was trained (its manifest), else with
    constrained: Optional[bool] = None  # None: use a grammar whenever the backend takes one


@register_policy("conductor")
class LMConductor(Policy):
    """Prompts the pool's conductor backend (or an explicit one) and parses its workflow."""

    name = "conductor"
    Options = ConductorOptions

    def __init__(self, temperature: Optional[float] = None, examples: Optional[bool] = None, constrained: Optional[bool] = None):
        self.temperature, self.examples, self.constrained = temperature, examples, constrained

    def check(self, pool: PoolSpec) -> None:
        super().check(pool)
        if pool.conductor.gates_unfamiliar:
            try:
                pool_familiarity(pool)
            except FamiliarityError as exc:
                raise PolicyError(str(exc)) from None

    async def plan(self, request: PlanRequest) -> Plan:
        pool, spec = request.pool, request.pool.spec
        options = spec.conductor
        recursive = request.previous is not None
        familiarity = None
        if options.gates_unfamiliar and not recursive:
            familiarity, unfamiliar = await self._familiarity(request)
            if unfamiliar is not None:
                return unfamiliar
        backend = pool.conductor_backend()
        examples, style = self.examples, "paper"
        if options.checkpoint:
            from ..providers.transformers_local import trained_prompt

            trained = trained_prompt(options.checkpoint)
            examples = (trained.examples is not False) if examples is None else examples
            style = trained.style or "paper"  # prompted exactly as it was trained
        messages = conductor_messages(
            request.question, spec, max_steps=request.max_steps, previous=request.previous, show=options.show,
            fine_grained=options.fine_grained_access, examples=examples is not False, style=style,
        )
        bound = trained_binding(spec)  # read once: the grammar and the parser must agree on the names
        names, aliases = bound[0], bound[1]
        use_grammar = backend.provider.supports_grammar if self.constrained is None else self.constrained
        grammar = planning_format(spec, request.max_steps, recursive=recursive, trained=bound).grammar() if use_grammar else None
        record = PlanRecord(policy=self.name, familiarity=familiarity)
        usage = Usage()
        start = time.perf_counter()
        temperature = options.temperature if self.temperature is None else self.temperature
        for attempt in range(1, options.max_attempts + 1):
            record.attempts = attempt
            max_tokens, reserved = options.max_tokens, None
            budget = request.budget
            if budget is not None:  # reserved like a worker call, so planning cannot overspend
                try:
                    max_tokens, held_tokens, held_cost = budget.reserve(
                        messages, max_tokens, backend.spec.price_input_per_m, backend.spec.price_output_per_m, worker_call=False
                    )
                    reserved = (held_tokens, held_cost)
                except LimitReached as exc:
                    record.errors.append(f"{exc.limit}: {exc}")
                    break
            completion = None
            try:
                seed = None if request.seed is None else request.seed + attempt
                completion, _ = await backend.call(messages, max_tokens=max_tokens, grammar=grammar, temperature=temperature, seed=seed)
            except WorkerCallError as exc:
                record.errors.append(f"backend_error: {exc}")
                continue
            finally:
                if budget is not None and reserved is not None:
                    budget.settle(*reserved, completion.usage if completion else None)
            usage = usage + completion.usage
            record.raw = completion.text
            try:
                # names: a grammar backend cannot bind the ids to the names while decoding, so they are bound here
                workflow = parse_and_validate(completion.text, len(spec.workers), max_steps=request.max_steps, allow_empty=recursive, names=names,
                                               aliases=aliases)
            except WorkflowError as exc:
                record.errors.append(f"{exc.code}: {exc}")
                continue
            record.workflow, record.usage, record.latency_s = workflow.to_record(), usage, time.perf_counter() - start
            return Plan(workflow, record)
        record.usage, record.latency_s = usage, time.perf_counter() - start
        return self._fallback(request, record)

    def fingerprint(self, pool: PoolSpec) -> dict:
        from ..providers.transformers_local import held_wordings

        conductor = pool.outcome_view({"conductor"})["conductor"]
        # The subtasks it is held to, not the setting: a checkpoint that records none plans as it did before the setting was.
        del conductor["subtasks"]
        if self.constrained is not False and (wordings := held_wordings(pool.conductor)):  # unconstrained, nothing holds it
            conductor["wordings"] = list(wordings)
        # Planning every question is how results were made before the setting: unchanged. The gate's file decides what it does.
        del conductor["unfamiliar"]
        if pool.conductor.gates_unfamiliar:
            try:
                familiar, fallback = pool_familiarity(pool)
                conductor["unfamiliar"] = {"threshold": familiar.threshold, "questions": len(familiar.data.questions), "fallback": fallback.render(),
                                           "sha256": familiar.digest}
            except FamiliarityError as exc:
                conductor["unfamiliar"] = {"error": str(exc)}
        return {**super().fingerprint(pool), "conductor": conductor}

    async def _familiarity(self, request: PlanRequest) -> tuple[FamiliarityCheck, Optional[Plan]]:
        """The familiarity test of the question (the current request alone, where the server rendered a conversation:
        its instructions would otherwise decide), and the checkpoint's fallback plan when the question fails it."""
        start = time.perf_counter()

        def test():  # off the event loop: reading the file and comparing are pure Python, and a question may be long
            familiar, workflow = pool_familiarity(request.pool.spec, request.max_steps)
            return familiar, workflow, *familiar.nearest(request.request_text or request.question)

        try:
            familiar, workflow, similarity, group = await asyncio.to_thread(test)
        except FamiliarityError as exc:
            raise PolicyError(str(exc)) from None
        check = FamiliarityCheck(similarity=similarity, nearest=group, threshold=familiar.threshold, gated=similarity < familiar.threshold)
        if not check.gated:
            return check, None
        record = PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record(), latency_s=time.perf_counter() - start,
                            familiarity=check,
                            fallback=f"unfamiliar question: its nearest training question ({group or 'none shares an n-gram'}) is "
                                     f"{similarity:.3f} similar, under the checkpoint's {familiar.threshold:.3f}; its fallback workflow "
                                     f"{familiar.data.fallback.name!r} runs")
        return check, Plan(workflow, record)

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
        workflow = Workflow((Step(index, SOLVE, ()),), reasoning="fallback")
        record.fallback = f"single worker {spec.workers[index].name!r} after {record.attempts} failed attempt(s)"
        record.workflow = workflow.to_record()
        return Plan(workflow, record)
