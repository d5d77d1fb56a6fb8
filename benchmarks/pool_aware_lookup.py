"""Does reading the pool's measured accuracies (not only their order) pay, on SIMULATED pools never seen? A probe of
what a conductor shown the ranking could learn beyond the rank lookup. Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/pool_aware_lookup.py --seeds 901,...,920 --n 64 --price 0.03

The rank lookup (``sim_eval.rank_table``) keys its plan on the question's bucket alone and names workers by their
place in the area's ranking. The *gap-aware* lookup also keys it on one thing the ranking view prints: whether the
area's best worker leads the second by at least the median lead over the training pools (a clear leader may be
best alone; a close second may be worth a check). Both are found across the same training pools (the training pool
and the 60 generated ones) on the same training-side questions at the same price, and scored on
``unseen_pools.py``'s pools and held-out questions. Prints each one's accuracy, tokens and margins, and the
gap-aware lookup's paired margin over the rank lookup. No model is loaded.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from openconductor.conductor.ranking import ranked_by_area
from openconductor.sim.plan_search import BUCKET, SearchSettings, at_ranks
from openconductor.sim.pools import DOMAIN_AREA, area_ranking
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import pooled_bootstrap, rank_lookup_plans, rank_table, run_plans, unseen_pools
from openconductor.train.sim_general import CopySettings, first_per_bucket, rank_table_of, search_questions, training_pools


def lead(spec, domain: str) -> float:
    """The area's best worker's measured accuracy minus the second's (a fraction; 1 when it has no second)."""
    ranked = ranked_by_area(spec, top=2).get(DOMAIN_AREA[domain], [])
    return 1.0 if len(ranked) < 2 else ranked[0][0] - ranked[1][0]


def gap_table(pools, questions, price: float) -> tuple[dict, dict]:
    """Per (bucket, clear leader or not): the best plan over ranks across the training pools of that kind, and the
    lead per domain that splits them (its median over the training pools)."""
    split = {d: statistics.median(lead(s, d) for s in pools) for d in DOMAIN_AREA}
    table = {}
    for domain in DOMAIN_AREA:
        asked = [q for q in questions if q.domain == domain]
        for clear in (False, True):
            kind = [s for s in pools if (lead(s, domain) >= split[domain]) == clear]
            found = rank_table(kind, asked, BUCKET, price)
            table.update({(bucket, clear): scored for bucket, scored in found.items()})
    return table, split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="comma-separated pool seeds (unseen_pools.py's)")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--price", type=float, default=SearchSettings.token_weight, help="token price per 1,000 tokens for both lookups")
    ap.add_argument("--rank-questions", type=int, default=5)
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--training-pool", default="examples/pools/simulated_paper_v3.toml")
    args = ap.parse_args()
    start = time.perf_counter()
    questions = make_questions(args.n, args.eval_seed)
    held_out = frozenset(q.text for q in questions)
    settings = CopySettings(rank_questions=args.rank_questions, search=SearchSettings(token_weight=args.price))
    pools = training_pools(settings, Path(args.training_pool))
    asked = first_per_bucket(search_questions(settings, held_out), settings.rank_questions)
    ranks = rank_table_of(pools, asked, settings)
    gaps, split = gap_table(pools, asked, args.price)
    pairs = {"rank": ([], []), "gap": ([], [])}  # (vs router, vs search)
    over_rank, ratios, accuracy = [], {"rank": [], "gap": []}, {"rank": [], "gap": []}
    for unseen in unseen_pools([int(s) for s in args.seeds.split(",") if s.strip()], questions):  # unseen_pools.py's pools and baselines
        spec, router, search, moa = unseen.spec, unseen.router, unseen.search, unseen.moa
        ranking = area_ranking(spec)
        gap_plans = [at_ranks(gaps[(q.bucket, lead(spec, q.domain) >= split[q.domain])].plan, ranking[q.domain]) for q in questions]
        runs = {"rank": run_plans("rank", spec, questions, rank_lookup_plans(spec, questions, ranks, BUCKET)),
                "gap": run_plans("gap", spec, questions, gap_plans)}
        for k, r in runs.items():
            pairs[k][0].append((r.correct, router.correct))
            pairs[k][1].append((r.correct, search.correct))
            ratios[k].append(r.mean_tokens / moa.mean_tokens)
            accuracy[k].append(r.accuracy)
        over_rank.append((runs["gap"].correct, runs["rank"].correct))
    print(f"SIMULATED: {len(accuracy['rank'])} unseen pools x {args.n} questions; both lookups at price {args.price}; "
          f"the lead that splits the training pools per area: " + ", ".join(f"{DOMAIN_AREA[d]} {100 * v:.0f}" for d, v in split.items()) + " points")
    print("| lookup | accuracy (mean of pools) | vs oracle router | vs per-pool search | tokens vs MoA |")
    print("|---|---|---|---|---|")
    for k, name in (("rank", "rank lookup (bucket)"), ("gap", "gap-aware rank lookup (bucket, clear leader)")):
        (m_r, lo_r, hi_r), (m_s, lo_s, hi_s) = pooled_bootstrap(pairs[k][0]), pooled_bootstrap(pairs[k][1])
        print(f"| {name} | {statistics.mean(accuracy[k]):.1f} | {m_r:+.1f} [{lo_r:+.1f}, {hi_r:+.1f}] | {m_s:+.2f} [{lo_s:+.1f}, {hi_s:+.1f}] | "
              f"{statistics.mean(ratios[k]):.3f}x |")
    m, lo, hi = pooled_bootstrap(over_rank)
    print(f"gap-aware over the rank lookup, paired: {m:+.2f} [{lo:+.1f}, {hi:+.1f}]; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
