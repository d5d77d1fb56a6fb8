"""The dry run's wall time per stage: the counted calls of each worker times its seconds per call.

Seconds per call come from the user's own endpoints, never from a table of models: a calibration
(``conductor fit POOL --dry-run --calibrate``: each model answers the first training question once, timed, through
the fit's replay store, so the real fit's profile replays it and pays nothing again), or a profile this folder has
already run (its seconds over its calls). A stage's calls run ``BATCH`` workflows at a time, each worker at most its
``concurrency`` at once, so a remote worker's calls take ``calls x seconds / min(concurrency, BATCH)``, the slowest
deciding; local models and tools share this machine's cores, so their calls add up.
The copy's time is the seconds per target and epoch of an earlier copy in this folder, else the offline pool's
measured copy (docs/fit.md: SmolLM2-135M + LoRA, 160 targets x 4 epochs in 13.5 minutes on 2 CPU cores).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ...pool import PoolSpec
    from .context import FitSettings

CALIBRATION_FILE = "calibration.json"
BATCH = 8  # the fit's Runner batch
LOCAL_PROVIDERS = frozenset({"local_gguf", "transformers", "python", "simulated"})
COPY_SECONDS_PER_TARGET_EPOCH = 13.5 * 60 / (160 * 4)


def seconds_per_call(out: Path, spec: "PoolSpec") -> tuple[dict[str, float], str]:
    """(worker -> seconds a call, where they come from); empty when nothing was measured."""
    path = out / CALIBRATION_FILE
    if path.exists():
        return json.loads(path.read_text())["seconds_per_call"], "calibrated on your endpoints (--calibrate)"
    state = out / "fit.json"
    if state.exists():
        profile = json.loads(state.read_text()).get("stages", {}).get("profile", {})
        calls = profile.get("spend", {}).get("calls", 0)
        if calls:
            each = profile["seconds"] / calls
            return {w.name: each for w in spec.workers}, "measured by this folder's profile (all workers alike)"
    return {}, "not measured: add --calibrate to time one call of each worker"


def stage_seconds(per_worker_calls: dict[str, int], per_call: dict[str, float], spec: "PoolSpec") -> Optional[float]:
    """The stage's wall time (None if a worker's seconds per call are unmeasured): remote workers run their calls up to
    their concurrency at once, the slowest deciding; local ones (in-process models, tools) share this machine's cores,
    so their calls add up."""
    workers = {w.name: w for w in spec.workers}
    local, remote = 0.0, [0.0]
    for name, calls in per_worker_calls.items():
        if name not in per_call:
            return None
        w = workers.get(name)
        if w is None or w.provider in LOCAL_PROVIDERS:
            local += calls * per_call[name]
        else:
            remote.append(calls * per_call[name] / max(1, min(w.concurrency, BATCH)))
    return max(local, max(remote))


def copy_seconds(out: Path, targets: int, epochs: int) -> tuple[float, str]:
    state = out / "fit.json"
    record = json.loads(state.read_text()).get("stages", {}).get("copy", {}) if state.exists() else {}
    done_epochs = record.get("epochs") or epochs
    if record.get("seconds") and record.get("targets"):
        each = record["seconds"] / (record["targets"] * done_epochs)
        return targets * epochs * each, "measured by this folder's copy"
    return targets * epochs * COPY_SECONDS_PER_TARGET_EPOCH, "the offline pool's copy rate on 2 CPU cores (docs/fit.md)"


TOOL_SECONDS = 1.0  # a tool call (the python sandbox running a short program): not timed alone, it needs a program


def calibrate(settings: "FitSettings") -> dict:
    """Each model of the pool alone on the first two training questions of the first kind, timed; written to
    ``OUT/calibration.json``. The first call loads a local model, so a model's time is its second call's (both are
    the profile's first questions, which the fit then replays from the store). A call the store already held (a
    calibration run before) times nothing: the earlier calibration's time is kept."""
    import asyncio

    from .spend_caps import MeteredStore
    from ..reward import WorkflowReward
    from .context import candidates_for, context, search_reward
    from ..search.fit_targets import Runner, single_candidates

    ctx = context(settings)
    settings.out.mkdir(parents=True, exist_ok=True)
    rows = next(iter(ctx.rows.values()))[:2]
    path = settings.out / CALIBRATION_FILE
    before = json.loads(path.read_text())["seconds_per_call"] if path.exists() else {}
    meter = MeteredStore(settings.out / "replay.sqlite3", workers={w.name for w in ctx.spec.workers}, max_calls=settings.max_calls,
                         max_cost=settings.max_cost)
    grader = WorkflowReward(ctx.spec, search_reward(ctx.cfg), ctx.cfg.prompt, cache=meter, owns_cache=False)
    seconds: dict[str, float] = {}

    async def timed() -> None:
        try:
            for single in single_candidates(candidates_for(ctx, None)):
                name = single.name[len("single:"):]
                for row in rows:
                    started, calls = time.monotonic(), meter.spend.calls
                    await Runner(grader, batch=1).outcomes([(row, single.text)])
                    if meter.spend.calls > calls:  # a real call, not a replay: the last one (a loaded model) counts
                        seconds[name] = round(time.monotonic() - started, 3)
                if name not in seconds and name in before:
                    seconds[name] = before[name]
        finally:
            await grader.aclose()

    try:
        asyncio.run(timed())
    finally:
        meter.close()
    tools = {w.name: TOOL_SECONDS for w in ctx.spec.workers if w.name not in seconds}
    data = {"seconds_per_call": {**seconds, **tools}, "questions": [r.question[:200] for r in rows], "at": time.strftime("%Y-%m-%d %H:%M:%S")}
    path.write_text(json.dumps(data, indent=1))
    return data
