"""The dry run's wall time per stage: the counted calls of each worker times its seconds per call.

Seconds per call come from the user's own endpoints, never from a table of models: a calibration
(``conductor fit POOL --dry-run --calibrate``: each model answers the first training question once, timed, through
the fit's replay store, so the real fit's profile replays it and pays nothing again), or a profile this folder has
already run (its seconds over its calls). A stage's calls run ``BATCH`` workflows at a time, each worker at most its
``concurrency`` at once, so a worker's calls take ``calls x seconds / min(concurrency, BATCH)``; the stage takes the
longest worker's time (local models share the machine's cores, which this does not model: it is a lower bound there).
The copy's time is the seconds per target and epoch of an earlier copy in this folder, else the offline pool's
measured copy (docs/fit.md: SmolLM2-135M + LoRA, 160 targets x 4 epochs in 13.5 minutes on 2 CPU cores).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..pool import PoolSpec
    from .fit import FitSettings

CALIBRATION_FILE = "calibration.json"
BATCH = 8  # the fit's Runner batch
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
    """The stage's wall time: its slowest worker's calls at that worker's parallelism; None if one is unmeasured."""
    concurrency = {w.name: w.concurrency for w in spec.workers}
    times = []
    for name, calls in per_worker_calls.items():
        if name not in per_call:
            return None
        times.append(calls * per_call[name] / max(1, min(concurrency.get(name, 1), BATCH)))
    return max(times, default=0.0)


def copy_seconds(out: Path, targets: int, epochs: int) -> tuple[float, str]:
    state = out / "fit.json"
    record = json.loads(state.read_text()).get("stages", {}).get("copy", {}) if state.exists() else {}
    done_epochs = record.get("epochs") or epochs
    if record.get("seconds") and record.get("targets"):
        each = record["seconds"] / (record["targets"] * done_epochs)
        return targets * epochs * each, "measured by this folder's copy"
    return targets * epochs * COPY_SECONDS_PER_TARGET_EPOCH, "the offline pool's copy rate on 2 CPU cores (docs/fit.md)"


def calibrate(settings: "FitSettings", rounds: int = 1) -> dict:
    """Each model of the pool alone on the first training question, ``rounds`` times (the replay store answers
    repeats, so a second round times nothing new), timed; written to ``OUT/calibration.json``."""
    import asyncio

    from .fit import candidates_for, context, search_reward
    from .fitsearch import Runner, single_candidates
    from .meter import MeteredStore
    from .reward import WorkflowReward

    ctx = context(settings)
    settings.out.mkdir(parents=True, exist_ok=True)
    row = next(iter(ctx.rows.values()))[0]
    meter = MeteredStore(settings.out / "replay.sqlite3", workers={w.name for w in ctx.spec.workers}, max_calls=settings.max_calls,
                         max_cost=settings.max_cost)
    grader = WorkflowReward(ctx.spec, search_reward(ctx.cfg), ctx.cfg.prompt, cache=meter, owns_cache=False)
    seconds: dict[str, float] = {}

    async def timed() -> None:
        try:
            for single in single_candidates(candidates_for(ctx, None)):
                started = time.monotonic()
                await Runner(grader, batch=1).outcomes([(row, single.text)])
                seconds[single.name[len("single:"):]] = round(time.monotonic() - started, 3)
        finally:
            await grader.aclose()

    try:
        asyncio.run(timed())
    finally:
        meter.close()
    # A tool (the python sandbox) is timed by the steps it runs in: its calls are counted as a model's share.
    tools = {w.name: min(seconds.values(), default=1.0) for w in ctx.spec.workers if w.name not in seconds}
    data = {"seconds_per_call": {**seconds, **tools}, "question": row.question[:200], "at": time.strftime("%Y-%m-%d %H:%M:%S")}
    (settings.out / CALIBRATION_FILE).write_text(json.dumps(data, indent=1))
    return data
