"""Running requests on the presets' pools: live Runs for the viewer, trace saving, event streams.

Each preset holds one live Pool for the server's lifetime (shared connection pools, semaphores) that
every request of that preset runs on. A run's events go to the trace store (written as the run
progresses, on a background thread: the event loop never waits for the database; its final state is
written before its client is answered, so an answered run is never lost to a crash), to the in-memory
table of live runs (so the viewer can follow a run), and, for streaming requests, to a per-request
queue that the stream drains. At start-up, and then every ``sweep_every_s``, runs left ``running`` by
a process that died are marked interrupted.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from ..answer_format import AnswerFormat
from ..budget import Limits
from ..executor import solve
from ..run_events import Event
from ..policies import make_policy
from ..policies.base import Policy
from ..pool import Pool, PoolConfigError, PoolSpec
from ..records import Run
from ..reply import AnswerStream as AnswerFilter  # the streamed answer: executor.clean_answer, token by token
from ..traces import LISTED, SQLTraceStore, TraceNotFound, TraceWriter, open_store
from .config import PresetSpec, ServerConfig
from .limits import Source as LimitSource

log = logging.getLogger(__name__)

DONE = object()  # end-of-run marker on a stream queue
TRACE_LINGER_S = 0.05  # a run's saves in progress within this long are written once; its final save is not delayed
PERSIST_TIMEOUT_S = 10.0  # the longest an answer waits for its run's final write
DoneHook = Callable[[Optional[Run]], Awaitable[None]]


@dataclass
class Preset:
    name: str
    spec: PresetSpec
    pool_spec: PoolSpec
    fingerprint: str  # changes whenever the pool, policy or limits change, even if `version` does not
    pool: Optional[Pool] = None
    policy: Optional[Policy] = None  # one per preset, like its pool (policies keep no per-request state)

    @property
    def pinned_id(self) -> str:
        return f"{self.name}@{self.spec.version}"

    @property
    def limits(self) -> Limits:
        return self.pool_spec.limits


def fingerprint(preset: PresetSpec, pool_spec: PoolSpec) -> str:
    blob = json.dumps({"preset": preset.model_dump(mode="json"), "pool": pool_spec.outcome_view()}, sort_keys=True)
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
    answer: Optional[AnswerFormat] = None  # what the caller asks of the final answer (tools, JSON, stop, sampling)
    max_output_tokens: Optional[int] = None
    request_text: Optional[str] = None  # the current user turn alone (``question`` renders the conversation)
    limit_sources: dict[str, LimitSource] = field(default_factory=dict)  # each limit's source (``limits.limit_sources``)
    quota_squeezed: bool = False  # the quota's share was cut by the key's other requests in flight
    messages: Optional[list[dict[str, Any]]] = None  # the caller's messages, as a passthrough preset sends them


class RunHandle:
    """A run in flight. ``events()`` yields its executor events (streaming); ``wait()`` its Run."""

    def __init__(self, runtime: "Runtime", request: Request, stream: bool, on_done: Optional[DoneHook] = None):
        self.runtime = runtime
        self.request = request
        self.stream = stream
        self.on_done = on_done
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
        try:
            run = await self._solve()
            # Stored as it ended before its client hears of it (the answer, the stream's last chunk): a
            # crash after the answer cannot leave it `running`, to be swept as interrupted.
            await asyncio.shield(self.runtime.persist(run))
            return run
        finally:
            self.runtime.finished(self.run)
            if self.on_done is not None:  # shielded: a cancelled run still releases its slot
                await asyncio.shield(self.on_done(self.run))
            if self.queue is not None:
                self.queue.put_nowait(DONE)

    async def _solve(self) -> Run:
        r = self.request
        pool = self.runtime.pool_for(r.preset)
        try:
            policy = r.preset.policy or make_policy(r.preset.spec.policy, **r.preset.spec.policy_options)
            return await solve(r.question, policy, pool, limits=r.limits, on_event=self._on_event, seed=r.seed,
                               metadata=r.metadata, stream_tokens=self.stream, answer=r.answer, max_output_tokens=r.max_output_tokens,
                               request_text=r.request_text, messages=r.messages)
        except asyncio.CancelledError:
            self._abort("cancelled: the client disconnected before the run finished")
            raise
        except Exception as exc:  # a bug or a pool that cannot plan (e.g. no conductor backend)
            log.exception("run failed")
            self._abort(f"{type(exc).__name__}: {exc}")
            if self.run is None:
                raise
            return self.run

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

    def __init__(self, config: ServerConfig, store: Optional[SQLTraceStore] = None):
        self.config = config
        self.store = store or open_store(config.server.traces)
        self.writer = TraceWriter(self.store)
        self._dirty: dict[str, Run] = {}  # saved since the last flush
        self._flush_handle: Optional[asyncio.TimerHandle] = None
        self._sweeper: Optional[asyncio.Task] = None
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
            try:  # build the conductor backend now, not inside the first request
                preset.pool.conductor_backend()
            except PoolConfigError:
                pass
            try:
                preset.policy = make_policy(preset.spec.policy, **preset.spec.policy_options)
            except (TypeError, ValueError):  # a bad option: each request's run reports it
                log.exception("preset %s: cannot build policy %r", preset.name, preset.spec.policy)
        await self.sweep()  # runs a crashed server left `running`
        self._sweeper = asyncio.create_task(self._sweep_forever())

    async def sweep(self) -> list[str]:
        """Mark runs whose process died as interrupted; beat this process's heartbeat."""
        try:
            await asyncio.to_thread(self.store.heartbeat)
            swept = await asyncio.to_thread(self.store.sweep_interrupted, frozenset(self.running))
        except Exception:
            log.exception("could not sweep interrupted runs in %s", self.store.location)
            return []
        if swept:
            log.warning("marked %d run(s) interrupted (their process stopped): %s", len(swept), ", ".join(swept))
        return swept

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.server.sweep_every_s)
            await self.sweep()

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for handle in list(self.handles):
            handle.cancel()
        for preset in self.presets.values():
            if preset.pool is not None:
                await preset.pool.aclose()
        self.flush_saves()
        await asyncio.to_thread(self._close_store)

    def _close_store(self) -> None:
        self.writer.close()  # writes what is queued
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

    def launch(self, request: Request, *, stream: bool, on_done: Optional[DoneHook] = None) -> RunHandle:
        handle = RunHandle(self, request, stream, on_done)
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
        """Save ``run`` within ``TRACE_LINGER_S``: saves of a run made meanwhile (its start, its plan, a step)
        are serialised once, in its latest state; the writer's thread does the writing."""
        if run.id in self._dirty:
            self._dirty[run.id] = run
            return
        self._dirty[run.id] = run
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(TRACE_LINGER_S, self.flush_saves)

    async def persist(self, run: Run) -> None:
        """Write ``run`` now and return once the store has it (or the write failed, which is logged)."""
        self._dirty.pop(run.id, None)  # this write supersedes a lingering one
        try:
            if not await asyncio.wait_for(asyncio.wrap_future(self.writer.save(run)), PERSIST_TIMEOUT_S):
                log.error("run %s was answered but its trace could not be saved", run.id)
        except Exception:  # the answer matters more than its trace; say so loudly
            log.exception("could not save trace %s within %g s", run.id, PERSIST_TIMEOUT_S)

    def flush_saves(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()  # called early (a listing): the timer has nothing left to do
        self._flush_handle = None
        dirty, self._dirty = self._dirty, {}
        for run in dirty.values():
            try:
                self.writer.save(run)  # serialises now
            except Exception:  # the answer matters more than its trace; say so loudly
                log.exception("could not save trace %s", run.id)

    def live(self, run_id: str) -> Optional[Run]:
        return self.running.get(run_id) or self.recent.get(run_id)

    async def get_run(self, run_id: str, api_key: Optional[str] = None) -> Run:
        """A run by id or unique prefix; with ``api_key``, only that key's runs exist (TraceNotFound otherwise)."""
        run = self.live(run_id)
        if run is not None and (api_key is None or run.metadata.get("api_key") == api_key):
            return run
        return await asyncio.to_thread(functools.partial(self.store.get, run_id, api_key=api_key))  # raises TraceNotFound

    async def list_runs(self, limit: int, api_key: Optional[str] = None, after: Optional[str] = None) -> tuple[list[dict], bool]:
        """Up to ``limit`` runs, newest first, after the run ``after`` (a cursor: the last id of the previous
        page; TraceNotFound if it is not one of this key's runs), and whether more follow."""
        # Read-your-writes: a run answered a moment ago may still sit in the linger window or the writer's
        # queue; write those first so the listing never misses a run its caller has already seen end.
        self.flush_saves()
        await asyncio.to_thread(self.writer.flush, 5.0)
        rows = await asyncio.to_thread(list_page, self.store, limit + 1, api_key, after)
        return rows[:limit], len(rows) > limit


def list_page(store: SQLTraceStore, limit: int, api_key: Optional[str], after: Optional[str]) -> list[dict]:
    """Runs ordered by (created_at, id), newest first: a cursor stays exact when runs share a timestamp or new
    ones arrive between pages (an offset would shift)."""
    where, args = (["api_key = ?"], [api_key]) if api_key is not None else ([], [])
    with store.transaction() as cur:
        if after is not None:
            cur.execute(store.sql(" AND ".join(["SELECT created_at FROM runs WHERE id = ?", *where])), (after, *args))
            found = cur.fetchone()
            if found is None:
                raise TraceNotFound(f"no trace with id {after!r}")
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            args += [found[0], found[0], after]
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        cur.execute(store.sql(f"SELECT {', '.join(LISTED)} FROM runs {clause}ORDER BY created_at DESC, id DESC LIMIT ?"), (*args, limit))
        return [dict(zip(LISTED, r)) for r in cur.fetchall()]


__all__ = ["AnswerFilter", "DONE", "Preset", "Request", "RunHandle", "Runtime", "TraceNotFound"]
