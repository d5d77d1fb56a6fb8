"""Planning time of a trained conductor held to its wordings (`[conductor] subtasks = "trained"`) against the same
conductor free, side by side on the default pool's llama.cpp backend.

Plans only (no worker runs), greedy, one question at a time as `conductor ask` does, alternating held and free per
question so that machine load falls on both alike. Prints the median and mean seconds per plan of each, and how many
plans differ. The checkpoint's manifest must record its wordings (`scripts/record_wordings.py`).

    PYTHONPATH=src python benchmarks/held_planning.py runs/refit-exact-held --n 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from openconductor.pool import PoolSpec, load_default_pool
from openconductor.conductor.checkpoint import trained_conductor, trained_wordings
from openconductor.tasks.base import load_task
from openconductor.tasks.kinds import HELD_OUT_KINDS

sys.path.insert(0, str(Path(__file__).parent))
from trained_planning import plan_side_by_side  # noqa: E402


def with_subtasks(spec: PoolSpec, subtasks: str) -> PoolSpec:
    conductor = spec.conductor.model_copy(update={"subtasks": subtasks})
    return PoolSpec.model_validate({**spec.model_dump(), "conductor": conductor.model_dump()})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path, help="a conductor whose manifest records its wordings")
    ap.add_argument("--n", type=int, default=3, help="questions per held-out kind (seed 4242)")
    args = ap.parse_args()
    if not trained_wordings(str(args.checkpoint)):
        print(f"{args.checkpoint}: its manifest records no wordings; run scripts/record_wordings.py on it first", file=sys.stderr)
        return 2
    spec, options = trained_conductor(load_default_pool(), args.checkpoint)
    engines = {"held": (with_subtasks(spec, "trained"), options), "free": (with_subtasks(spec, "free"), options)}
    questions = [task.text(q) for kind in HELD_OUT_KINDS for task in [load_task(kind, limit=args.n, seed=4242)] for q in task.questions]
    results = asyncio.run(plan_side_by_side(engines, questions, spec.conductor.max_steps))
    for name, (_, seconds) in results.items():
        print(f"{name}: {len(seconds)} plans, median {statistics.median(seconds):.2f} s, mean {statistics.mean(seconds):.2f} s")
    held, free = results["held"][0], results["free"][0]
    differ = sum((a.render() if a else None) != (b.render() if b else None) for a, b in zip(held, free))
    ratio = statistics.median(results["held"][1]) / statistics.median(results["free"][1])
    print(f"held / free median planning time: {ratio:.2f}x; {differ} of {len(questions)} plans differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
