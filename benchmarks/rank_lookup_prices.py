"""The rank lookup at several token prices, on SIMULATED pools it never saw: how cheap can a table that a
conductor reading the pool's ranking could copy be, at what accuracy? Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/rank_lookup_prices.py --seeds 901,...,920 --n 64 --prices 0.012,0.02,0.03,0.05

Per price: the rank lookup (``sim_eval.rank_table``: one plan over ranks per bucket, found across the training
pool and the 60 generated training pools, exactly as ``unseen_pools.py`` finds it, only the price differs) on the
same unseen pools and held-out questions as ``unseen_pools.py``; beside it each pool's oracle router, the
per-pool search re-run and MoA (tokens). Prints one row per price: mean accuracy, the paired margins over the
router and the search re-run (95 % intervals, each pool's questions resampled), and its tokens as a fraction of
MoA's, with ``--own`` added: a conductor's own prompt and plan (the ranking view's 0.046x, measured by
``unseen_pools.py --show ranking``), so the last column reads against the goal "<= 0.25x MoA" as a copy of
that table would. ``--ranking subtopic``: ranks are places in the subtopic's measured ranking, not the area's (a
probe of what a finer profile would give a conductor; the ranking view does not print it, and a prompt listing all
16 subtopics' top three would be about 300 tokens, 0.034x MoA, longer than the areas' four lines). No model is
loaded: a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from openconductor.sim.plan_search import BUCKET, SearchSettings
from openconductor.sim.pools import RANKINGS
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import pooled_bootstrap, rank_lookup_plans, run_plans, unseen_pools
from openconductor.train.sim_general import CopySettings, rank_lookup_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="comma-separated pool seeds (unseen_pools.py's)")
    ap.add_argument("--n", type=int, default=64, help="held-out questions per pool")
    ap.add_argument("--prices", default="0.012,0.02,0.03,0.05", help="comma-separated token prices (score per 1,000 tokens)")
    ap.add_argument("--own", type=float, default=0.046, help="a conductor's own call, as a fraction of MoA's tokens, added to the table's")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--rank-questions", type=int, default=5)
    ap.add_argument("--training-pool", default="examples/pools/simulated_paper_v3.toml")
    ap.add_argument("--ranking", choices=sorted(RANKINGS), default="area",
                    help="the ranking a rank names a place in: the area's (what the ranking view shows) or the subtopic's (measured on "
                         "the same profile questions, 60 a subtopic)")
    args = ap.parse_args()
    start = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    prices = [float(p) for p in args.prices.split(",") if p.strip()]
    questions = make_questions(args.n, args.eval_seed)
    held_out = frozenset(q.text for q in questions)
    tables = {p: rank_lookup_table(Path(args.training_pool), held_out,
                                   CopySettings(rank_questions=args.rank_questions, search=SearchSettings(token_weight=p)), args.ranking)
              for p in prices}
    router_pairs: dict[float, list] = {p: [] for p in prices}
    search_pairs: dict[float, list] = {p: [] for p in prices}
    ratios: dict[float, list[float]] = {p: [] for p in prices}
    accuracy: dict[float, list[float]] = {p: [] for p in prices}
    steps: dict[float, list[float]] = {p: [] for p in prices}
    search_ratio = []
    for unseen in unseen_pools(seeds, questions):  # unseen_pools.py's pools and baselines
        spec, router, search, moa = unseen.spec, unseen.router, unseen.search, unseen.moa
        search_ratio.append(search.mean_tokens / moa.mean_tokens)
        for p, table in tables.items():
            plans = rank_lookup_plans(spec, questions, table, BUCKET, args.ranking)
            rank = run_plans("rank lookup", spec, questions, plans)
            router_pairs[p].append((rank.correct, router.correct))
            search_pairs[p].append((rank.correct, search.correct))
            ratios[p].append(rank.mean_tokens / moa.mean_tokens)
            accuracy[p].append(rank.accuracy)
            steps[p].append(sum(len(w.steps) for w in plans) / len(plans))
    print(f"SIMULATED: the rank lookup over the {args.ranking} ranking at several token prices; {len(seeds)} unseen pools x {args.n} held-out questions; "
          f"the per-pool search re-run (price {SearchSettings.token_weight}) costs {sum(search_ratio) / len(search_ratio):.3f}x MoA")
    print(f"| price per 1,000 tokens | accuracy (mean of pools) | vs oracle router | vs per-pool search | steps | tokens vs MoA | with a conductor's own call (+{args.own}) |")
    print("|---|---|---|---|---|---|---|")
    for p in prices:
        m_r, lo_r, hi_r = pooled_bootstrap(router_pairs[p])
        m_s, lo_s, hi_s = pooled_bootstrap(search_pairs[p])
        ratio = sum(ratios[p]) / len(ratios[p])
        print(f"| {p} | {sum(accuracy[p]) / len(accuracy[p]):.1f} | {m_r:+.1f} [{lo_r:+.1f}, {hi_r:+.1f}] | {m_s:+.2f} [{lo_s:+.1f}, {hi_s:+.1f}] | "
              f"{sum(steps[p]) / len(steps[p]):.2f} | {ratio:.3f}x | {ratio + args.own:.3f}x |")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
