"""Does a simulated conductor follow its copy's targets on the training pool, and how good are those targets? (SIMULATED)

    PYTHONPATH=src python benchmarks/copy_fidelity.py --conductor runs/s31/warmup=0.012 --conductor builtin:sim-subtopic=0.03

Each ``CKPT=PRICE`` names a conductor copied with ``targets = "mixed"`` and the token price its training-pool targets were
searched at (``--training-pool-token-weight``, else ``--token-weight``). For each price, the training pool's own
per-bucket table is searched again exactly as the copy searched it (``sim_general.search_tables``: the copy's search
settings and training-side questions, the held-out questions excluded) and scored on ``--n`` held-out questions. Then
each conductor plans ``--per-bucket`` held-out questions of every bucket (greedy), counted against its own table's plan
and every other table's. A copy that follows its targets but scores under the benchmark's per-bucket lookup
(``sim_training_pool.py``, a search on three times the questions) is held back by its targets, not by the copy.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import Counter
from pathlib import Path

from openconductor.pool import load_pool
from openconductor.sim.plan_search import SearchSettings
from openconductor.sim.pools import with_profile
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import LOOKUP_SEARCH, conductor_plans, lookup_search_questions, run_plans, trained_ranking
from openconductor.train.sim_general import CopySettings, search_questions, search_tables

ROOT = Path(__file__).resolve().parents[1]


def conductor_price(text: str) -> tuple[str, float]:
    ckpt, sep, price = text.rpartition("=")
    try:
        value = float(price)
    except ValueError:
        value = -1.0
    if not sep or not ckpt or not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write CKPT=PRICE, the price the copy's training-pool targets were searched at (e.g. builtin:sim-subtopic=0.03)")
    return ckpt, value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", type=conductor_price, action="append", required=True, metavar="CKPT=PRICE")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--per-bucket", type=int, default=2, help="held-out questions per bucket each conductor plans")
    ap.add_argument("--pool", type=Path, default=ROOT / "examples" / "pools" / "simulated_paper_v3.toml")
    args = ap.parse_args()

    spec = load_pool(args.pool)
    questions = make_questions(args.n, args.eval_seed)
    held = frozenset(q.text for q in questions)
    # Each price's table searched as the copy searches (its targets) and as sim_training_pool.py's lookup does. The search
    # reads the workers' declared skills, not a measured profile, so the pool is searched as its file declares it.
    searches = {"copy": (SearchSettings(), search_questions(CopySettings(), held)), "lookup": (LOOKUP_SEARCH, lookup_search_questions(held))}
    prices = sorted({p for _, p in args.conductor})
    tables = {}
    print(f"SIMULATED: world v3, pool {spec.name}; the training pool's own per-bucket table at each price, searched as the copy searches "
          f"({SearchSettings().questions} questions a bucket: the copy's targets) and as sim_training_pool.py's lookup does ({LOOKUP_SEARCH.questions})")
    print(f"| searched at | questions a bucket | accuracy on {args.n} held-out questions | tokens/q | buckets whose plan differs from the first price's |\n|---|---|---|---|---|")
    for price in prices:
        for kind, (settings, on) in searches.items():
            found = search_tables(spec, on, dataclasses.replace(settings, token_weight=price))
            table = tables[price, kind] = {bucket: best[0].plan for bucket, best in found.items()}
            result = run_plans(f"{price}", spec, questions, [table[q.bucket] for q in questions])
            differ = sum(table[b].steps != tables[prices[0], kind][b].steps for b in table)
            print(f"| {price} | {settings.questions} | {result.accuracy:.1f} | {sum(result.tokens) / len(questions):,.0f} | {differ} of {len(table)} |")
    seen: Counter = Counter()
    sample = [q for q in questions if not (seen.update([q.bucket]) or seen[q.bucket] > args.per_bucket)]
    print(f"\nEach conductor's greedy plans on {len(sample)} held-out questions ({args.per_bucket} a bucket where the {args.n} hold them)")
    print("| conductor | " + " | ".join(f"the table at {p}'s plan" for p in prices) + " |\n|---|" + "---|" * len(prices))
    for ckpt, _ in args.conductor:
        plans, _ = conductor_plans(ckpt, with_profile(spec, trained_ranking(ckpt)), sample)
        same = [sum(p is not None and p.steps == tables[price, "copy"][q.bucket].steps for p, q in zip(plans, sample)) for price in prices]
        print(f"| {ckpt} | " + " | ".join(f"{k}/{len(sample)}" for k in same) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
