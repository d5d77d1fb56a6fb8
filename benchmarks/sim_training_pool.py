"""A general conductor on its training pool (world v3, `examples/pools/simulated_paper_v3.toml`) against every
baseline, on held-out questions. Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/sim_training_pool.py --conductor RUN/warmup [--conductor RUN/final] --n 1000

Rows: each conductor (greedy, the pool shown as it was trained: ``sim_eval.trained_ranking``), the best single worker, the oracle per-domain
router, MoA, and the best lookup tables found by the plan search (sim/plan_search.py) on training-side
questions: one plan per domain, per subtopic and per bucket (subtopic x level), and the rank lookup (one plan over
the places in the question's area's ranking per bucket, found across every training pool: the table that
``--targets ranks`` copies and ``unseen_pools.py`` scores on pools never seen; and the same over the places in the
question's *subtopic's* measured ranking, ``rank_lookup_prices.py --ranking subtopic``), both at ``--rank-price``. Intervals: paired bootstrap
over the questions against the per-domain and the per-subtopic lookups (and against the first conductor
when several are given: what GRPO adds over its warm-up; or with ``--show``, the same conductor prompted with
another view of the pool; or with ``--profile-questions N``, the same conductor reading the pool's profile measured on N
questions instead of 960, the rank lookups likewise). Exits 1 when the first conductor
misses a goal: >= per-domain lookup + 3 and >= per-subtopic lookup.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openconductor.pool import WORKER_VIEWS, load_pool
from openconductor.sim.plan_search import BUCKET, SearchSettings
from openconductor.sim.world_v3 import make_questions
from openconductor.sim.pools import profile_size_arg, with_profile
from openconductor.train.sim_eval import LOOKUP_SEARCH, conductor_plans, lookup_plans, lookup_search_questions, moa_plans, rank_lookup_plans, run_plans, single_plans, table, trained_ranking
from openconductor.train.sim_general import CopySettings, rank_lookup_table

ROOT = Path(__file__).resolve().parents[1]
LABELS = ["domain", "subtopic", "bucket (subtopic x level)"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", action="append", default=[], help="a checkpoint (repeatable)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--pool", type=Path, default=ROOT / "examples" / "pools" / "simulated_paper_v3.toml")
    ap.add_argument("--show", choices=WORKER_VIEWS, default=None,
                    help="also score each conductor prompted with this view of the pool instead of the one it was trained with "
                         "(a probe of what it reads; rows compared with the first conductor)")
    ap.add_argument("--profile-questions", type=profile_size_arg, default=None,
                    help="also score each conductor and the rank lookups with the pool's profile measured on this many questions "
                         "(default profile: 960; rows compared with the first conductor)")
    ap.add_argument("--rank-price", type=float, default=SearchSettings.token_weight, help="the token price the rank lookups are found at")
    args = ap.parse_args()
    from openconductor.providers.transformers_local import checkpoint_path, load_checkpoint

    spec = load_pool(args.pool)
    questions = make_questions(args.n, args.eval_seed)
    search_questions = lookup_search_questions(frozenset(q.text for q in questions))
    results = []
    for ckpt in args.conductor:
        model = load_checkpoint(checkpoint_path(ckpt))  # loaded once for both views
        trained = trained_ranking(ckpt)
        profiled = with_profile(spec, trained)  # its ranking lines as its copy's pools showed them
        plans, own = conductor_plans(ckpt, profiled, questions, model=model)
        results.append(run_plans(f"conductor {ckpt}", spec, questions, plans, own))
        if args.show:
            shown = conductor_plans(ckpt, profiled, questions, model=model, show=args.show)
            results.append(run_plans(f"conductor {ckpt} (show = {args.show})", spec, questions, *shown))
        if args.profile_questions:
            finer = conductor_plans(ckpt, with_profile(spec, trained, args.profile_questions), questions, model=model)
            results.append(run_plans(f"conductor {ckpt} (profile on {args.profile_questions} questions)", spec, questions, *finer))
    results += [run_plans(k, spec, questions, v) for k, v in single_plans(spec, questions).items()]
    results.append(run_plans("MoA (7 proposers + random aggregator)", spec, questions, moa_plans(spec, questions)))
    results += [run_plans(k, spec, questions, v) for k, v in lookup_plans(spec, questions, search_questions, LABELS, LOOKUP_SEARCH).items()]
    priced = CopySettings(search=SearchSettings(token_weight=args.rank_price))
    for ranking, label in (("area", "rank lookup (per bucket, over ranks)"), ("subtopic", "rank lookup (per bucket, over the subtopic's ranks)")):
        ranks = rank_lookup_table(args.pool, frozenset(q.text for q in questions), priced, ranking)
        results.append(run_plans(label, spec, questions, rank_lookup_plans(spec, questions, ranks, BUCKET, ranking)))
        if args.profile_questions:
            measured = with_profile(spec, ranking, args.profile_questions)
            results.append(run_plans(f"{label} (profile on {args.profile_questions} questions)", spec, questions,
                                     rank_lookup_plans(measured, questions, ranks, BUCKET, ranking)))
    print(f"SIMULATED: world v3, pool {spec.name}, {args.n} held-out questions (eval seed {args.eval_seed})")
    against = ["best lookup: one plan per domain", "best lookup: one plan per subtopic", "oracle per-domain router"]
    # With several conductors (e.g. RUN/warmup then RUN/final) the others are also compared with the first.
    print(table(results, against + ([results[0].system] if len(args.conductor) > 1 or args.show or args.profile_questions else [])))
    if not args.conductor:
        return 0
    acc = {r.system: r.accuracy for r in results}
    first = results[0].accuracy
    missed = first < acc["best lookup: one plan per domain"] + 3 or first < acc["best lookup: one plan per subtopic"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
