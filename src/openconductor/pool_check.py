"""`conductor pool FILE --check`: call every worker once with a tiny prompt and say what answered.

`conductor pool` alone reads the file and the environment (keys, packages); it cannot tell a server that is down
or a key that is wrong. The check calls each model worker (the conductor backend declared apart included) once,
without retries, and reports reachability, a refused key (naming its variable), the latency, and whether a
declared grammar is honoured (the probe's grammar allows only "yes" while the prompt asks for "ok").
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal, Optional

from pydantic import BaseModel

from .pool import TOOL_PROVIDERS, Pool, PoolSpec, Worker, WorkerCallError, WorkerSpec

PROMPT = [{"role": "user", "content": "Reply with the word ok."}]
PROBE_GRAMMAR = 'root ::= "yes"'  # honoured: the reply is "yes" though the prompt asks for "ok"
CHECK_TIMEOUT_S = 60.0  # a check waits at most this long for each worker (less where the worker's own timeout is less)
AUTH_STATUS = (401, 403)

Outcome = Literal["ok", "unreachable", "auth", "error", "skipped"]


class WorkerCheck(BaseModel):
    """What one worker's check call found."""

    worker: str
    outcome: Outcome
    detail: str = ""
    latency_s: Optional[float] = None
    grammar: Literal["honoured", "ignored", "refused", "not declared", "-"] = "-"
    json_schema: Literal["native", "prompted", "-"] = "-"

    @property
    def failed(self) -> bool:
        return self.outcome in ("unreachable", "auth", "error")

    def line(self) -> str:
        if self.outcome != "ok":
            return f"{self.worker}: {self.outcome}: {self.detail}"
        return (f"{self.worker}: ok in {self.latency_s:.2f} s; grammar {self.grammar}; JSON schema {self.json_schema}"
                + (f" ({self.detail})" if self.detail else ""))


def checked_spec(spec: PoolSpec) -> PoolSpec:
    """The pool as the check calls it: one attempt per worker, a bounded wait, and no trained checkpoint (a local
    model, not an endpoint: `conductor ask` loads it)."""
    quick = lambda w: w.model_copy(update={"max_retries": 0, "timeout_s": min(w.timeout_s, CHECK_TIMEOUT_S)})  # noqa: E731
    conductor = spec.conductor.model_copy(update={"checkpoint": None, "backend": quick(spec.conductor.backend) if spec.conductor.backend else None})
    return spec.model_copy(update={"workers": [quick(w) for w in spec.workers], "conductor": conductor})


async def check_pool_calls(spec: PoolSpec, skip: frozenset[str] = frozenset()) -> list[WorkerCheck]:
    """One check per worker of the pool (and the conductor backend declared apart), run concurrently; ``skip``:
    workers not to call (a missing key or package, already reported: the pool cannot even be built with them)."""
    spec = checked_spec(spec)
    skipped = [WorkerCheck(worker=w.name, outcome="skipped", detail="its key or package is missing (above)")
               for w in spec.all_workers() if w.name in skip]
    keep = [i for i, w in enumerate(spec.workers) if w.name not in skip]
    if not keep:
        return skipped
    spec = spec.subset(keep)
    if spec.conductor.backend is not None and spec.conductor.backend.name in skip:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"backend": None})})
    async with Pool(spec) as pool:
        workers = list(pool.workers) + ([pool.conductor_backend()] if spec.conductor.backend is not None else [])
        return list(await asyncio.gather(*(check_worker(w, pool) for w in workers))) + skipped


async def check_worker(worker: Worker, pool: Pool) -> WorkerCheck:
    spec = worker.spec
    if spec.provider in TOOL_PROVIDERS or spec.provider == "conductor":
        why = pool.unavailable.get(worker.name)
        return WorkerCheck(worker=worker.name, outcome="error" if why else "skipped", detail=why or "a tool or the conductor itself: not called")
    schema: Literal["native", "prompted"] = "native" if "json_schema" in worker.provider.native else "prompted"
    grammar = PROBE_GRAMMAR if worker.provider.supports_grammar else None
    start = time.perf_counter()
    try:
        completion, _ = await worker.call(PROMPT, max_tokens=8, grammar=grammar, temperature=0.0)
    except WorkerCallError as exc:
        if grammar is not None and _refused_grammar(exc):  # the endpoint answers, but not with a grammar
            return await _without_grammar(worker, schema)
        return _failure(worker.name, spec, worker, exc)
    latency = time.perf_counter() - start
    honoured = completion.text.strip().strip('".').lower() == "yes"
    state = ("honoured" if honoured else "ignored") if grammar is not None else "not declared"
    return WorkerCheck(worker=worker.name, outcome="ok", latency_s=latency, grammar=state, json_schema=schema)


async def _without_grammar(worker: Worker, schema: Literal["native", "prompted"]) -> WorkerCheck:
    start = time.perf_counter()
    try:
        await worker.call(PROMPT, max_tokens=8, temperature=0.0)
    except WorkerCallError as exc:
        return _failure(worker.name, worker.spec, worker, exc)
    return WorkerCheck(worker=worker.name, outcome="ok", latency_s=time.perf_counter() - start, grammar="refused", json_schema=schema,
                       detail="the server refused the grammar field: set options.grammar = false")


def _refused_grammar(exc: WorkerCallError) -> bool:
    cause = exc.__cause__
    return getattr(cause, "status", None) in (400, 422) and "grammar" in str(exc).lower()


def _failure(name: str, spec: WorkerSpec, worker: Worker, exc: WorkerCallError) -> WorkerCheck:
    """A failed call as reachability, a refused key (naming where the key came from) or another error."""
    cause = exc.__cause__
    status = getattr(cause, "status", None)
    if status in AUTH_STATUS:
        envs = " or ".join(worker.provider.key_variables(spec)) or "no key variable (api_key_env is unset)"
        return WorkerCheck(worker=name, outcome="auth", detail=f"the key was refused (HTTP {status}); it comes from {envs}: check its value")
    text = str(cause or exc)
    if status is None and ("request failed" in text or "timed out" in text):
        return WorkerCheck(worker=name, outcome="unreachable", detail=f"{spec.base_url or spec.model}: {text}")
    return WorkerCheck(worker=name, outcome="error", detail=text)
