"""The dry run's wall time per stage: the counted calls of each worker times its seconds per call.

Seconds per call come from the user's own endpoints, never from a table of models: a calibration
(``conductor fit POOL --dry-run --calibrate``: each model answers the first training question once, timed, through
the fit's replay store, so the real fit's profile replays it and pays nothing again), or a profile this folder has
already run (its seconds over its calls). A stage's calls run ``BATCH`` workflows at a time, each worker at most its
``concurrency`` at once, so a remote worker's calls take ``calls x seconds / min(concurrency, BATCH)``, the slowest
deciding; local models and tools share this machine's cores, so their calls add up.
The copy's time is a fixed start (the model loaded, the adapter set up, the round saved) plus seconds per optimiser
step, the step's from an earlier copy in this folder, else from the offline pool's copies (``COPY_START_S``); then the
fidelity pass, the copy planning every training question once (``FIDELITY_PLAN_S`` each).
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
# The recipe's copy (SmolLM2-135M + LoRA, batch 8) on 2 CPU cores, fitted to three measured copies: 160 targets x 4
# epochs (80 steps) in 13.5 min (docs/fit.md), 12 x 4 (8 steps) in 235 and 272 s (results.md [50]), 2 x 1 (1 step) in
# 191 s ([57]): a start of ~190 s dominates small copies, which seconds per target and epoch alone put at 3 s (2 x 1).
COPY_START_S, COPY_STEP_S = 190.0, 7.7
FIDELITY_PLAN_S = 10.0  # the copy planning one training question, greedy: 8-12 s on 2 busy cores ([50], [57])


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


def copy_seconds(out: Path, targets: int, epochs: int, batch: int) -> tuple[float, float, str]:
    """(the copy's seconds, its fidelity pass's seconds, where the step time comes from) for one round of ``epochs``."""
    steps = -(-targets // max(1, batch)) * epochs
    state = out / "fit.json"
    record = json.loads(state.read_text()).get("stages", {}).get("copy", {}) if state.exists() else {}
    step, source = COPY_STEP_S, "the offline pool's copies on 2 CPU cores (timing.py)"
    done_epochs = record.get("epochs") or epochs
    if record.get("seconds") and record.get("targets"):
        rounds = -(-done_epochs // max(1, epochs))  # each round starts the model again
        done_steps = -(-record["targets"] // max(1, batch)) * done_epochs
        step, source = max(0.0, record["seconds"] - rounds * COPY_START_S) / done_steps, "this folder's copy (its seconds a step)"
    return COPY_START_S + steps * step, targets * FIDELITY_PLAN_S, source


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
