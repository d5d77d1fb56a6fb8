"""Does a general conductor write the ids of the workers it names? A diagnostic on SIMULATED world-v3 pools.

    PYTHONPATH=src python benchmarks/sim_conductor_names.py --conductor runs/e3/warmup --n 32 --seeds 901,905

Per pool (the training pool, then each generated pool `generate_pool(seed)`): how many plans parse; how
many reasoning lines name a worker the pool does not have; how many name exactly the workers whose ids
the plan then writes; how many plans use the same workers as the search's per-bucket plan; and the
workers most often called first. Every number is SIMULATED.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from openconductor.pool import load_pool
from openconductor.sim.plan_search import BUCKET, SearchSettings
from openconductor.sim.pools import generate_pool, pool_spec
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import conductor_plans, lookup_plans

ROOT = Path(__file__).resolve().parents[1]


def named(reasoning: str) -> list[str]:
    """The worker names of a reasoning line "Reasoning: LEVEL SUBTOPIC: role name, role name" (last word of each part)."""
    if reasoning.count(": ") < 2:
        return []
    return [part.split(" ")[-1] for part in reasoning.split(": ", 2)[-1].split(", ") if part]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", required=True)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seeds", default="901,905")
    ap.add_argument("--eval-seed", type=int, default=1000)
    args = ap.parse_args()
    from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

    model = load_checkpoint(checkpoint_path(args.conductor))
    questions = make_questions(args.n, args.eval_seed)
    search_questions = make_questions(48 * SearchSettings().questions, 5_000, exclude=frozenset(q.text for q in questions))
    pools = [("training pool", load_pool(ROOT / "examples" / "pools" / "simulated_paper_v3.toml"))]
    pools += [(f"pool {s}", pool_spec(generate_pool(int(s)))) for s in args.seeds.split(",") if s.strip()]
    print(f"SIMULATED: world v3, {args.n} held-out questions per pool, conductor {args.conductor}")
    for label, spec in pools:
        plans, _ = conductor_plans(args.conductor, spec, questions, model=model)
        best = lookup_plans(spec, questions, search_questions, [BUCKET], SearchSettings())[f"best lookup: one plan per {BUCKET}"]
        names = {w.name for w in spec.workers}
        said = [named(p.reasoning) if p else [] for p in plans]
        foreign = sum(any(n not in names for n in s) for s in said)
        match = sum(p is not None and [spec.workers[st.worker].name for st in p.steps] == s for p, s in zip(plans, said))
        same = sum(p is not None and [st.worker for st in p.steps] == [st.worker for st in b.steps] for p, b in zip(plans, best))
        first = collections.Counter(spec.workers[p.steps[0].worker].name for p in plans if p)
        print(f"{label}: parsed {sum(p is not None for p in plans)}/{len(plans)}; names a worker not in the pool {foreign}; "
              f"names match the ids written {match}; same workers as the search's bucket plan {same}; first worker {dict(first.most_common(4))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
