"""How much any policy that reads the question could still gain, in world v3: the ceiling GRPO climbs towards. SIMULATED.

    PYTHONPATH=src python benchmarks/sim_headroom.py [--conductor CKPT] [--seeds 901,...,920 --n 64]

A v3 question shows its domain, subtopic and difficulty (its *bucket*); the rest (shared difficulty, blind
spots, call noise) is hidden. So the best policy that reads the question is a table of one plan per bucket,
and its ceiling is that table found with an unlimited search budget: every candidate plan (the search's
five shapes over the whole pool, ``plan_search.exhaustive_group``) ranked per bucket on
``--ceiling-questions`` training-side questions (priced as the search is), then scored on the held-out
questions. Rows, on the training pool's held-out questions (as ``sim_training_pool.py``):

* the budgeted per-bucket lookup (the search a copy imitates) and, with ``--conductor``, the conductor;
* the ceiling, and its paired margin over each of them: what GRPO from that warm-up could gain at most
  (within the five shapes) without seeing hidden noise;
* for scale, two numbers no policy can reach: the best plan per bucket picked on the held-out questions
  themselves (selection bias), and the per-question oracle over every plan (it sees the hidden noise).

With ``--seeds``: the same on pools never trained on (``unseen_pools.py``'s pools and questions), against
the rank lookup (what the shipped copy reproduces there, +0.0 in docs/results.md [14]) and the per-pool search re-run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from openconductor.pool import PoolSpec, load_pool
from openconductor.sim.plan_search import BUCKET, SearchSettings, candidate_plans, exhaustive_group, steps_of
from openconductor.sim.pools import generate_pool, pool_spec
from openconductor.sim.questions import Question
from openconductor.sim.world_v3 import make_questions, run_plan
from openconductor.train.sim_eval import (LOOKUP_SEARCH, Result, conductor_plans, declared, lookup_plans, lookup_search_questions, pooled_bootstrap, rank_lookup_plans,
                                          run_plans)
from openconductor.train.sim_general import CopySettings, rank_lookup_table
from openconductor.workflow import Workflow

ROOT = Path(__file__).resolve().parents[1]
TRAINING_POOL = ROOT / "examples" / "pools" / "simulated_paper_v3.toml"


def ceiling_plans(spec: PoolSpec, questions: Sequence[Question], training_side: Sequence[Question]) -> list[Workflow]:
    """Per held-out question, its bucket's best plan from the exhaustive search on ``training_side``."""
    members: dict = defaultdict(list)
    for q in training_side:
        members[q.bucket].append(q)
    profiles = declared(spec)
    best = {b: exhaustive_group(profiles, qs).plan for b, qs in members.items()}
    return [best[q.bucket] for q in questions]


def unreachable(spec: PoolSpec, questions: Sequence[Question]) -> tuple[float, float]:
    """(best plan per bucket picked on ``questions`` themselves, per-question oracle over every plan), in %."""
    profiles, plans = declared(spec), candidate_plans(len(spec.workers))
    steps = [steps_of(p) for p in plans]
    right = [[run_plan(q.text, s, profiles).correct for s in steps] for q in questions]
    members: dict = defaultdict(list)
    for i, q in enumerate(questions):
        members[q.bucket].append(i)
    in_sample = sum(max(sum(right[i][k] for i in idx) for k in range(len(plans))) for idx in members.values())
    return 100 * in_sample / len(questions), 100 * sum(any(r) for r in right) / len(questions)


def margin(a: Result, b: Result) -> str:
    m, lo, hi = pooled_bootstrap([(a.correct, b.correct)])
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def training_pool(args) -> None:
    spec = load_pool(args.pool)
    questions = make_questions(args.n, args.eval_seed)
    held = frozenset(q.text for q in questions)
    settings = LOOKUP_SEARCH  # sim_training_pool.py's lookups
    search_questions = lookup_search_questions(held)
    ceiling_questions = make_questions(48 * args.ceiling_questions, 7_000, exclude=held)
    start = time.perf_counter()
    rows = [run_plans("best lookup: one plan per bucket (budgeted search)", spec, questions,
                      lookup_plans(spec, questions, search_questions, [BUCKET], settings)[f"best lookup: one plan per {BUCKET}"])]
    for ckpt in args.conductor:
        rows.append(run_plans(f"conductor {ckpt}", spec, questions, *conductor_plans(ckpt, spec, questions)))
    ceiling = run_plans(f"ceiling: every plan per bucket, ranked on {args.ceiling_questions} a bucket", spec, questions,
                        ceiling_plans(spec, questions, ceiling_questions))
    in_sample, oracle = unreachable(spec, questions)
    print(f"SIMULATED: world v3, pool {spec.name}, {args.n} held-out questions (eval seed {args.eval_seed}), {time.perf_counter() - start:.0f} s")
    print("| system | accuracy | tokens/q | ceiling's margin over it (points, 95% CI) |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r.system} | {r.accuracy:.1f} | {r.mean_tokens:.0f} | {margin(ceiling, r)} |")
    print(f"| **{ceiling.system}** | **{ceiling.accuracy:.1f}** | {ceiling.mean_tokens:.0f} | |")
    print(f"| not reachable: best plan per bucket picked on these questions (selection bias) | {in_sample:.1f} | | |")
    print(f"| not reachable: per-question oracle over every plan (sees the hidden noise) | {oracle:.1f} | | |")


def unseen_pools(args) -> None:
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    questions = make_questions(args.n, args.eval_seed)
    held = frozenset(q.text for q in questions)
    settings = SearchSettings()  # unseen_pools.py's per-pool search re-run
    search_questions = lookup_search_questions(held, settings)
    ceiling_questions = make_questions(48 * args.pool_ceiling_questions, 7_000, exclude=held)
    ranks = rank_lookup_table(args.pool, held, CopySettings())
    from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

    models = {c: load_checkpoint(checkpoint_path(c)) for c in args.conductor}
    print(f"\nSIMULATED: world v3, generated pools never trained on, {args.n} held-out questions a pool "
          f"(ceiling ranked on {args.pool_ceiling_questions} a bucket)")
    print("| seed | workers | rank lookup | search re-run | ceiling |" + "".join(f" {c} |" for c in args.conductor))
    print("|---|---|---|---|---|" + "---|" * len(args.conductor))
    pairs: dict[str, list] = defaultdict(list)
    start = time.perf_counter()
    for i, seed in enumerate(seeds):
        pool = generate_pool(seed, held_out=i % 2 == 1)  # unseen_pools.py's default: every other pool from held-out families
        spec = pool_spec(pool)
        rank = run_plans("rank", spec, questions, rank_lookup_plans(spec, questions, ranks, BUCKET))
        search = run_plans("search", spec, questions, lookup_plans(spec, questions, search_questions, [BUCKET], settings)[f"best lookup: one plan per {BUCKET}"])
        ceiling = run_plans("ceiling", spec, questions, ceiling_plans(spec, questions, ceiling_questions))
        others = [run_plans(c, spec, questions, *conductor_plans(c, spec, questions, model=models[c])) for c in args.conductor]
        for r in [rank, search, *others]:
            pairs[r.system].append((ceiling.correct, r.correct))
        print(f"| {seed} | {len(pool.workers)} | {rank.accuracy:.1f} | {search.accuracy:.1f} | {ceiling.accuracy:.1f} |"
              + "".join(f" {o.accuracy:.1f} |" for o in others), flush=True)
    names = {"rank": "the rank lookup", "search": "the per-pool search re-run", **{c: f"conductor {c}" for c in args.conductor}}
    print(f"\n{len(seeds)} pools, {time.perf_counter() - start:.0f} s. Ceiling's mean margin over pools:")
    for system, p in pairs.items():
        m, lo, hi = pooled_bootstrap(p)
        print(f"- over {names[system]}: {m:+.1f} [{lo:+.1f}, {hi:+.1f}]")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", action="append", default=[], help="a checkpoint to score too (repeatable; slow on CPU)")
    ap.add_argument("--n", type=int, default=1000, help="held-out questions on the training pool")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--pool", type=Path, default=TRAINING_POOL, help="the training pool")
    ap.add_argument("--ceiling-questions", type=int, default=300, help="training-side questions a bucket for the ceiling (training pool)")
    ap.add_argument("--seeds", default="", help="comma-separated seeds of unseen pools (unseen_pools.py's)")
    ap.add_argument("--pool-n", type=int, default=64, help="held-out questions a pool on unseen pools")
    ap.add_argument("--pool-ceiling-questions", type=int, default=150, help="training-side questions a bucket for an unseen pool's ceiling")
    ap.add_argument("--skip-training-pool", action="store_true")
    args = ap.parse_args()
    if not args.skip_training_pool:
        training_pool(args)
    if args.seeds:
        unseen_pools(argparse.Namespace(**{**vars(args), "n": args.pool_n}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
