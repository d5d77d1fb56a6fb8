"""Running requests on the presets' pools: live Runs for the viewer, trace saving, event streams.

Each preset holds one live Pool for the server's lifetime (shared connection pools, semaphores), and
each request gets a light view of it carrying that preset's spec. A run's events go to the trace store
(written as the run progresses), to the in-memory table of live runs (so the viewer can follow a run),
and, for streaming requests, to a per-request queue that the SSE response drains.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

from ..budget import Limits
from ..executor import Event, solve
from ..policies import make_policy
from ..pool import Pool, PoolConfigError, PoolSpec
from ..records import Run
from ..reply import AnswerStream as AnswerFilter  # the streamed answer: executor.clean_answer, token by token
from ..traces import TraceNotFound, TraceStore
from .config import PresetSpec, ServerConfig

log = logging.getLogger(__name__)

DONE = object()  # end-of-run marker on a stream queue


@dataclass
class Preset:
    name: str
    spec: PresetSpec
    pool_spec: PoolSpec
    fingerprint: str  # changes whenever the pool, policy or limits change, even if `version` does not
    pool: Optional[Pool] = None

    @property
    def pinned_id(self) -> str:
        return f"{self.name}@{self.spec.version}"

    @property
    def limits(self) -> Limits:
        return self.pool_spec.limits


def fingerprint(preset: PresetSpec, pool_spec: PoolSpec) -> str:
    blob = json.dumps({"preset": preset.model_dump(mode="json"), "pool": pool_spec.model_dump(mode="json")}, sort_keys=True)
    return "fp_" + hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class Request:
    """One accepted request, ready to run."""

    preset: Preset
    model_id: str  # as the client named it
    question: str
    limits: Limits
    seed: Optional[int] = None
    metadata: dict[str, Any] = field(default_factory=dict)


class RunHandle:
    """A run in flight. ``events()`` yields its executor events (streaming); ``wait()`` its Run."""

    def __init__(self, runtime: "Runtime", request: Request, stream: bool):
        self.runtime = runtime
        self.request = request
        self.stream = stream
        self.queue: Optional[asyncio.Queue] = asyncio.Queue() if stream else None
        self.run: Optional[Run] = None
        self.started = asyncio.Event()
        self.task = asyncio.create_task(self._main())

    def _on_event(self, event: Event) -> None:
        if event.run.depth == 0:
            if event.type == "run_started":
                self.run = event.run
                self.runtime.track(event.run)
                self.started.set()
            if event.type in ("run_started", "plan", "step_finished", "run_finished"):
                self.runtime.save(event.run)
        if self.queue is not None:
            self.queue.put_nowait(event)

    async def _main(self) -> Run:
        r = self.request
        pool = self.runtime.pool_for(r.preset)
        try:
            policy = make_policy(r.preset.spec.policy, **r.preset.spec.policy_options)
            run = await solve(r.question, policy, pool, limits=r.limits, on_event=self._on_event, seed=r.seed,
                            metadata=r.metadata, stream_tokens=self.stream)
            return run
        except asyncio.CancelledError:
            self._abort("cancelled: the client disconnected before the run finished")
            raise
        except Exception as exc:  # a bug or a pool that cannot plan (e.g. no conductor backend)
            log.exception("run failed")
            self._abort(f"{type(exc).__name__}: {exc}")
            if self.run is None:
                raise
            return self.run
        finally:
            self.runtime.finished(self.run)
            if self.queue is not None:
                self.queue.put_nowait(DONE)

    def _abort(self, reason: str) -> None:
        run = self.run
        if run is None:
            return
        run.status, run.error = "error", reason
        for step in run.steps:
            if step.status in ("pending", "running"):
                step.status, step.error = "error", reason
        self.runtime.save(run)

    async def wait(self) -> Run:
        return await self.task

    async def events(self) -> AsyncIterator[Event]:
        assert self.queue is not None
        while True:
            item = await self.queue.get()
            if item is DONE:
                return
            yield item

    def cancel(self) -> None:
        if not self.task.done():
            self.task.cancel()


class Runtime:
    """Presets with their live pools, live runs, and the trace store."""

    def __init__(self, config: ServerConfig, store: Optional[TraceStore] = None):
        self.config = config
        self.store = store or TraceStore(config.server.traces)
        self.presets: dict[str, Preset] = {}
        for name, spec in config.models.items():
            pool_spec = config.pool_spec(spec)
            self.presets[name] = Preset(name, spec, pool_spec, fingerprint(spec, pool_spec))
        self.running: dict[str, Run] = {}  # in progress, updated in place by the executor's events
        self.recent: "OrderedDict[str, Run]" = OrderedDict()  # finished, newest last, bounded
        self.handles: set[RunHandle] = set()

    async def start(self) -> None:
        for preset in self.presets.values():
            preset.pool = Pool(preset.pool_spec)
            try:  # build the conductor backend once, so request views of the pool share it
                preset.pool.conductor_backend()
            except PoolConfigError:
                pass

    async def stop(self) -> None:
        for handle in list(self.handles):
            handle.cancel()
        for preset in self.presets.values():
            if preset.pool is not None:
                await preset.pool.aclose()
        self.store.close()

    def resolve(self, model: str) -> Optional[Preset]:
        name, _, version = model.partition("@")
        preset = self.presets.get(name)
        if preset is None or (version and version != preset.spec.version):
            return None
        return preset

    def pool_for(self, preset: Preset) -> Pool:
        assert preset.pool is not None, "Runtime.start() was not called"
        return preset.pool

    def launch(self, request: Request, *, stream: bool) -> RunHandle:
        handle = RunHandle(self, request, stream)
        self.handles.add(handle)
        handle.task.add_done_callback(lambda _t: self.handles.discard(handle))
        return handle

    # ---------------------------------------------------------------------------------- live runs

    def track(self, run: Run) -> None:
        self.running[run.id] = run

    def finished(self, run: Optional[Run]) -> None:
        """Move a run from the running table to the bounded table of recent finished runs (O(1))."""
        if run is None:
            return
        self.running.pop(run.id, None)
        self.recent[run.id] = run
        while len(self.recent) > self.config.server.live_runs_kept:
            self.recent.popitem(last=False)

    def save(self, run: Run) -> None:
        try:
            self.store.save(run)
        except Exception:  # the answer matters more than its trace; say so loudly
            log.exception("could not save trace %s", run.id)

    def live(self, run_id: str) -> Optional[Run]:
        return self.running.get(run_id) or self.recent.get(run_id)

    def get_run(self, run_id: str) -> Run:
        run = self.live(run_id)
        if run is not None:
            return run
        return self.store.get(run_id)  # raises TraceNotFound

    def list_runs(self, limit: int, api_key: Optional[str] = None) -> list[dict]:
        return self.store.list(limit, api_key=api_key)


__all__ = ["AnswerFilter", "DONE", "Preset", "Request", "RunHandle", "Runtime", "TraceNotFound"]
