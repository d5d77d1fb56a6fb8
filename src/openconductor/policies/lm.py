"""The LM conductor: a language model that writes the workflow.

The prompt (``conductor/prompt.py``: ``conductor_messages``) is shared with the trainer, so a trained model drops
into the runtime unchanged. On backends that take a GBNF grammar (in-process llama.cpp) decoding is
constrained so the three lists always parse, with their lengths tied together; on OpenAI-compatible servers that
take a JSON schema, the same format is sent as one (``WorkflowFormat.json_schema``: steps as objects); elsewhere a
parse failure is resampled up to ``max_attempts`` and then a declared fallback runs (the trace says so).
"""

from __future__ import annotations

import asyncio
import time
from typing import Optional

from ..budget import LimitReached
from ..conductor.checkpoint import held_wordings, trained_prompt
from ..conductor.familiar import FamiliarityError, pool_familiarity
from ..conductor.prompt import conductor_messages, planning_grammar, trained_binding
from ..pool import PoolSpec, WorkerCallError
from ..records import FamiliarityCheck, PlanRecord, Usage
from ..workflow import Step, Workflow, WorkflowError, parse_and_validate
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, register_policy
from ..workflow.wordings import SOLVE



class ConductorOptions(PolicyOptions):
    temperature: Optional[float] = None  # None: the pool's [conductor] temperature
    examples: Optional[bool] = None  # None: as the pool's trained conductor was trained (its manifest), else with
    constrained: Optional[bool] = None  # None: use a grammar (or its JSON schema) whenever the backend takes one


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

    def _messages(self, request: PlanRequest) -> list[dict[str, str]]:
        """The conductor's prompt; a trained conductor is prompted exactly as it was trained (its examples, its style)."""
        spec = request.pool.spec
        options = spec.conductor
        examples, style = self.examples, "paper"
        if options.checkpoint:
            trained = trained_prompt(options.checkpoint)
            examples = (trained.examples is not False) if examples is None else examples
            style = trained.style or "paper"  # prompted exactly as it was trained
        return conductor_messages(
            request.question, spec, max_steps=request.max_steps, previous=request.previous, show=options.show,
            fine_grained=options.fine_grained_access, examples=examples is not False, style=style,
        )

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
        messages = self._messages(request)
        bound = trained_binding(spec)  # read once: the grammar and the parser must agree on the names
        names, aliases = bound[0], bound[1]
        provider = backend.provider  # a grammar, or the same format as a JSON schema on servers that take one (openai_compat)
        use_grammar = (provider.supports_grammar or provider.supports_json_schema) if self.constrained is None else self.constrained
        grammar = planning_grammar(spec, request.max_steps, recursive=recursive, trained=bound) if use_grammar else None
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
