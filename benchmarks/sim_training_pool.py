"""A general conductor on its training pool (world v3, `examples/pools/simulated_paper_v3.toml`) against every
baseline, on held-out questions. Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/sim_training_pool.py --conductor RUN/warmup [--conductor RUN/final] --n 1000 [--eval-seed 1000,2000 --jobs 2]

Rows: each conductor (greedy, the pool shown as it was trained: ``evaluation.simulated.trained_ranking``), the best single worker, the oracle per-domain
router, MoA, and the best lookup tables found by the plan search (sim/plan_search.py) on training-side
questions: one plan per domain, per subtopic and per bucket (subtopic x level), and the rank lookup (one plan over
the places in the question's area's ranking per bucket, found across every training pool: the table that
``--targets ranks`` copies and ``unseen_pools.py`` scores on pools never seen; and the same over the places in the
question's *subtopic's* measured ranking), both at ``--rank-price``. Intervals: paired bootstrap
over the questions against the per-domain and the per-subtopic lookups (and against the first conductor
when several are given: what GRPO adds over its warm-up; or with ``--show``, the same conductor prompted with
another view of the pool; or with ``--profile-questions N``, the same conductor reading the pool's profile measured on N
questions instead of 960, the rank lookups likewise). With several held-out sets (``--eval-seed S1,S2``) each is scored
apart and a last line pools the first conductor's margins over them (``evaluation.pooled_bootstrap``: a larger sample
than one set of 1,000, whose interval is about +-1.5 points). Exits 1 when the first conductor misses a goal
(mean over the sets): >= per-domain lookup + 3 and >= per-subtopic lookup.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Optional

from openconductor.pool import WORKER_VIEWS, load_pool
from openconductor.sim.plan_search import BUCKET, SearchSettings
from openconductor.sim.world_v3 import make_questions
from openconductor.sim.pools import profile_size_arg, with_profile
from openconductor.evaluation import pooled_bootstrap
from openconductor.evaluation.simulated import (LOOKUP_SEARCH, Result, conductor_plans, lookup_plans, lookup_search_questions, moa_plans,
                                          rank_lookup_plans, run_plans, single_plans, table, trained_ranking)
from openconductor.train.sim_general_search import CopyDataError, CopySettings, rank_lookup_table, training_questions

ROOT = Path(__file__).resolve().parents[1]
LABELS = ["domain", "subtopic", "bucket (subtopic x level)"]


def score_set(args: argparse.Namespace, eval_seed: int, threads: Optional[int] = None, trained: frozenset[str] = frozenset()) -> list[Result]:
    """Every row of the table on one held-out set: ``args.n`` questions drawn with ``eval_seed`` and none of ``trained``
    (questions a conductor was trained or searched on); the lookups are searched on training-side questions that
    exclude them (``threads``: torch's, when sets are scored side by side)."""
    from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

    if threads:
        import torch

        torch.set_num_threads(threads)
    spec = load_pool(args.pool)
    questions = make_questions(args.n, eval_seed, exclude=trained)
    search_questions = lookup_search_questions(frozenset(q.text for q in questions))
    results = []
    for ckpt in args.conductor:
        model = load_checkpoint(checkpoint_path(ckpt))  # loaded once for both views
        ranking = trained_ranking(ckpt)
        profiled = with_profile(spec, ranking)  # its ranking lines as its copy's pools showed them
        plans, own = conductor_plans(ckpt, profiled, questions, model=model)
        results.append(run_plans(f"conductor {ckpt}", spec, questions, plans, own))
        if args.show:
            shown = conductor_plans(ckpt, profiled, questions, model=model, show=args.show)
            results.append(run_plans(f"conductor {ckpt} (show = {args.show})", spec, questions, *shown))
        if args.profile_questions:
            finer = conductor_plans(ckpt, with_profile(spec, ranking, args.profile_questions), questions, model=model)
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
    return results


def eval_seeds(text: str) -> list[int]:
    """``S1,S2,...``: distinct whole numbers (an argparse type)."""
    try:
        seeds = [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes whole numbers separated by commas, e.g. 1000,2000 (got {text!r})") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"names a held-out set twice ({text!r}): the pooled interval would count its questions twice")
    return seeds


def pooled_line(sets: list[list[Result]], against: list[str]) -> str:
    """The first row's mean margin over the sets against each of ``against``, resampling each set's questions."""
    cells = []
    for a in against:
        pairs = [(rows[0].correct, next(r for r in rows if r.system == a).correct) for rows in sets]
        m, lo, hi = pooled_bootstrap(pairs)
        cells.append(f"vs {a} {m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
    mean = sum(rows[0].accuracy for rows in sets) / len(sets)
    return f"pooled over {len(sets)} held-out sets ({sum(len(rows[0].correct) for rows in sets)} questions): {sets[0][0].system} {mean:.1f}; " + "; ".join(cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", action="append", default=[], help="a checkpoint (repeatable)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--eval-seed", type=eval_seeds, default=[1000],
                    help="the held-out set's seed, or several (S1,S2,...): each set of --n questions is scored apart (its lookups "
                         "searched without its questions), then the first row's margins are pooled over the sets. A conductor's copy "
                         "excluded only its config's eval seed (1000): check that the others' questions were not among its training ones")
    ap.add_argument("--copy-data", type=Path, action="append", default=[],
                    help="a conductor's copy data (RUN/copy_data.json.gz, repeatable): every held-out set is drawn without the questions "
                         "it was trained or searched on (a set drawn with another seed than the one its search excluded can hold some)")
    ap.add_argument("--jobs", type=int, default=1, help="score this many held-out sets side by side (a process each, CPU threads shared)")
    ap.add_argument("--pool", type=Path, default=ROOT / "examples" / "pools" / "simulated_paper_v3.toml")
    ap.add_argument("--show", choices=WORKER_VIEWS, default=None,
                    help="also score each conductor prompted with this view of the pool instead of the one it was trained with "
                         "(a probe of what it reads; rows compared with the first conductor)")
    ap.add_argument("--profile-questions", type=profile_size_arg, default=None,
                    help="also score each conductor and the rank lookups with the pool's profile measured on this many questions "
                         "(default profile: 960; rows compared with the first conductor)")
    ap.add_argument("--rank-price", type=float, default=SearchSettings.token_weight, help="the token price the rank lookups are found at")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1 (got {args.jobs})")
    try:
        trained = frozenset().union(*(training_questions(path) for path in args.copy_data))
    except CopyDataError as exc:
        ap.error(str(exc))
    jobs, k = min(args.jobs, len(args.eval_seed)), len(args.eval_seed)
    if jobs > 1:
        threads = max(1, (os.cpu_count() or 1) // jobs)
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as workers:
            sets = list(workers.map(score_set, [args] * k, args.eval_seed, [threads] * k, [trained] * k))
    else:
        sets = [score_set(args, seed, trained=trained) for seed in args.eval_seed]
    spec = load_pool(args.pool)
    against = ["best lookup: one plan per domain", "best lookup: one plan per subtopic", "oracle per-domain router"]
    for seed, results in zip(args.eval_seed, sets):
        without = f", none of the {len(trained):,} questions the copy data's conductors were trained or searched on" if trained else ""
        print(f"SIMULATED: world v3, pool {spec.name}, {args.n} held-out questions (eval seed {seed}{without})")
        # With several conductors (e.g. RUN/warmup then RUN/final) the others are also compared with the first.
        print(table(results, against + ([results[0].system] if len(args.conductor) > 1 or args.show or args.profile_questions else [])))
    if not args.conductor:
        return 0
    if len(sets) > 1:
        print(pooled_line(sets, against[:2] + ["best lookup: one plan per bucket (subtopic x level)"]))
    acc = {r.system: sum(rows[i].accuracy for rows in sets) / len(sets) for i, r in enumerate(sets[0])}
    first = acc[sets[0][0].system]
    missed = first < acc["best lookup: one plan per domain"] + 3 or first < acc["best lookup: one plan per subtopic"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
