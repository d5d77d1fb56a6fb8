"""A general conductor on SIMULATED pools it never saw, against each pool's baselines. Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/unseen_pools.py --seeds 901,902,...,920 --n 96 [--conductor CKPT] [--compare CKPT,...]

For each seed: the pool `generate_pool(seed, held_out=...)` (every other seed, starting with the second,
draws from every family with at least one held out of training), N held-out questions (world v3), and on
them: the conductor (default builtin:sim-bucket; greedy, the pool shown as it was trained), the pool's best single
worker and oracle per-domain router (declared accuracies), MoA (7 proposers + random aggregator; tokens
only matter here) and the per-pool search re-run (sim/plan_search.py, one plan per bucket, found on
training-side questions: what a lookup reaches with its own search budget), and the rank lookup: one plan per
bucket over ranks ("plan with the best of the question's area, check with the second"), found across the 60
generated training pools and the training pool (``evaluation.simulated.rank_table``), the lookup a conductor that reads the
measured ranking could reach on any pool without learning it. Prints one row per pool and a
last line with the mean margins over pools and 95 % intervals (each pool's questions resampled); exits 1
when a goal is missed: mean >= oracle router + 2, >= search re-run - 2, tokens <= 0.25x MoA's. ``--compare``:
other conductors on the same pools and questions, a column each, and the conductor's paired margin over each.
``--show VIEW``: the conductor is prompted with that view of each pool instead of the one it was trained with
(``pool.PoolView``; e.g. ``ranking``, the names and measured ranking without descriptions), a probe of what it reads.
Each conductor sees each pool's profile measured as its copy's training pools were (per area, or per subtopic:
``evaluation.simulated.trained_ranking``; ``--profile`` overrides), measured on ``--profile-questions`` questions a pool (960 by
default, the pool files' own; the rank lookups read the same measurement). ``--rank RANKING:PRICE`` (repeatable; default area:0.012):
the rank lookups to score, over the area's or the subtopic's ranking at that token price, a column and a margin each.
``--jobs N``: score N pools at a time, a process each (CPU threads shared); the table and its last line are the same
as one process prints, rows in seed order.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from openconductor.pool import WORKER_VIEWS
from openconductor.sim.plan_search import BUCKET
from openconductor.sim.world_v3 import make_questions
from openconductor.sim.plan_search import SearchSettings
from openconductor.sim.pools import PROFILE_QUESTIONS, PROFILES, RANKINGS, profile_size_arg, with_profile
from openconductor.evaluation import pooled_bootstrap
from openconductor.evaluation.simulated import (Result, conductor_plans, held_out_flags, lookup_search_questions, rank_lookup_plans, run_plans,
                                          trained_ranking, unseen_pool)
from openconductor.train.sim_general_search import CopySettings, rank_lookup_table


def rank_spec(text: str) -> tuple[str, float]:
    ranking, _, price = text.partition(":")
    if ranking not in RANKINGS or not price:
        raise argparse.ArgumentTypeError(f"{text!r}: write RANKING:PRICE, RANKING one of {', '.join(RANKINGS)} (e.g. subtopic:0.03)")
    try:
        value = float(price)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the price {price!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the price must be a finite number, 0 or more")
    return ranking, value


@dataclass
class PoolScore:
    """One pool's results on the held-out questions: what its row and its share of the last line are made of."""
    seed: int
    families: str  # the held-out families it draws from, "—" for none
    workers: int
    conductor: Result
    own_tokens: float  # the conductor's own prompt and plan, mean per question
    best: Result
    router: Result
    search: Result
    moa: Result
    ranks: dict  # (ranking, price) -> Result
    others: dict  # --compare conductor -> Result


class Scorer:
    """The conductors, questions and rank tables every pool is scored with: built once per process."""

    def __init__(self, args: argparse.Namespace, threads: Optional[int] = None):
        from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

        if threads:
            import torch

            torch.set_num_threads(threads)
        self.args = args
        self.model = load_checkpoint(checkpoint_path(args.conductor))
        self.others = {c: load_checkpoint(checkpoint_path(c)) for c in compared(args)}
        self.questions = make_questions(args.n, args.eval_seed)
        held_out = frozenset(q.text for q in self.questions)
        self.searched_on = lookup_search_questions(held_out, SearchSettings())  # the per-pool search re-run's questions
        self.tables = {(r, p): rank_lookup_table(Path(args.training_pool), held_out, CopySettings(rank_questions=args.rank_questions,
                                                                                                  search=SearchSettings(token_weight=p)), r)
                       for r, p in dict.fromkeys(lookups(args))}
        self.profiles = profiles(args)

    def score(self, seed: int, held: bool) -> PoolScore:
        args, questions = self.args, self.questions
        unseen = unseen_pool(seed, held, questions, self.searched_on)
        spec = unseen.spec
        shown = {c: with_profile(spec, p, args.profile_questions) for c, p in self.profiles.items()}  # ids and workers as in spec: only the ranking lines differ
        measured = {r: with_profile(spec, r, args.profile_questions) for r, _ in self.tables}  # what each rank lookup's places are over
        plans, own = conductor_plans(args.conductor, shown[args.conductor], questions, model=self.model, show=args.show)
        ranks = {key: run_plans(rank_name(key), spec, questions, rank_lookup_plans(measured[key[0]], questions, table, BUCKET, key[0]))
                 for key, table in self.tables.items()}
        others = {c: run_plans(c, spec, questions, *conductor_plans(c, shown[c], questions, model=m)) for c, m in self.others.items()}
        families = ", ".join(sorted({f for f in unseen.pool.families if unseen.held_out and f in ("verifier", "quant")})) or "—"
        return PoolScore(seed, families, len(unseen.pool.workers), run_plans("conductor", spec, questions, plans, own), sum(own) / len(own),
                         unseen.best_single, unseen.router, unseen.search, unseen.moa, ranks, others)


_SCORER: Optional[Scorer] = None


def _start_worker(args: argparse.Namespace, threads: int) -> None:
    global _SCORER
    _SCORER = Scorer(args, threads)


def _score_in_worker(seed: int, held: bool) -> PoolScore:
    assert _SCORER is not None
    return _SCORER.score(seed, held)


def compared(args: argparse.Namespace) -> list[str]:
    """The --compare conductors, each once."""
    return list(dict.fromkeys(c.strip() for c in args.compare.split(",") if c.strip()))


def lookups(args: argparse.Namespace) -> list[tuple[str, float]]:
    return args.rank or [("area", SearchSettings.token_weight)]


def profiles(args: argparse.Namespace) -> dict[str, str]:
    return {c: args.profile or trained_ranking(c) for c in [args.conductor, *compared(args)]}


def rank_name(key: tuple[str, float]) -> str:
    return f"rank lookup ({key[0]}, {key[1]:g})"


def scored_pools(args: argparse.Namespace, seeds: list[int]):
    """Each pool's PoolScore in seed order, as it is ready (``--jobs`` pools at a time, a spawned process each)."""
    flags = held_out_flags(len(seeds), args.held_out)
    jobs = min(args.jobs, len(seeds))
    if jobs == 1:
        scorer = Scorer(args)
        yield from (scorer.score(seed, held) for seed, held in zip(seeds, flags))
        return
    threads = max(1, len(os.sched_getaffinity(0)) // jobs)  # the cores this process may use, not the machine's
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(args, threads)) as workers:
        yield from workers.map(_score_in_worker, seeds, flags)


def row(pool: PoolScore) -> str:
    c, ranks = pool.conductor, list(pool.ranks.values())
    return (f"| {pool.seed} | {pool.families} | {pool.workers} | {c.accuracy:.1f} | {pool.best.accuracy:.1f} | {pool.router.accuracy:.1f} | {pool.search.accuracy:.1f} |"
            + "".join(f" {r.accuracy:.1f} |" for r in ranks)
            + f" {c.accuracy - pool.router.accuracy:+.1f} | {c.accuracy - pool.search.accuracy:+.1f} |"
            + "".join(f" {c.accuracy - r.accuracy:+.1f} |" for r in ranks) + f" {c.mean_tokens / pool.moa.mean_tokens:.3f}x |"
            + "".join(f" {o.accuracy:.1f} |" for o in pool.others.values()))


def interval(margin: tuple[float, float, float]) -> str:
    """``pooled_bootstrap``'s (mean, low, high) as printed."""
    return "{:+.1f} [{:+.1f}, {:+.1f}]".format(*margin)


def summary(pools: list[PoolScore], seconds: float) -> tuple[list[str], bool]:
    """The last lines (mean margins over pools, each pool's questions resampled) and whether a goal is missed."""
    def vs(a, b) -> tuple[float, float, float]:
        return pooled_bootstrap([(a(p).correct, b(p).correct) for p in pools])

    conductor = (lambda p: p.conductor)  # noqa: E731
    vs_router, vs_search = vs(conductor, lambda p: p.router), vs(conductor, lambda p: p.search)
    ratio = sum(p.conductor.mean_tokens / p.moa.mean_tokens for p in pools) / len(pools)
    own = sum(p.own_tokens / p.moa.mean_tokens for p in pools) / len(pools)
    keys = list(pools[0].ranks)
    vs_ranks = "".join(f"; vs {rank_name(k)} {interval(vs(conductor, lambda p, k=k: p.ranks[k]))}" for k in keys)
    lines = [f"\n{len(pools)} pools, {seconds:.0f} s (loading the conductors and the rank tables included). Mean over pools: conductor vs best single {interval(vs(conductor, lambda p: p.best))}; "
             f"vs oracle router {interval(vs_router)} (goal >= +2); vs per-pool search re-run {interval(vs_search)} (goal >= -2){vs_ranks}; "
             f"tokens {ratio:.3f}x MoA (goal <= 0.25x; of which the conductor's own prompt and plan {own:.3f}x)"]
    for k in keys:
        lines.append(f"{rank_name(k)}: vs oracle router {interval(vs(lambda p, k=k: p.ranks[k], lambda p: p.router))}; "
                     f"vs per-pool search re-run {interval(vs(lambda p, k=k: p.ranks[k], lambda p: p.search))}; "
                     f"tokens {sum(p.ranks[k].mean_tokens / p.moa.mean_tokens for p in pools) / len(pools):.3f}x MoA")
    for c in pools[0].others:
        lines.append(f"conductor vs {c}: {interval(vs(conductor, lambda p, c=c: p.others[c]))}")
    return lines, vs_router[0] < 2.0 or vs_search[0] < -2.0 or ratio > 0.25


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="comma-separated pool seeds")
    ap.add_argument("--n", type=int, default=96, help="held-out questions per pool")
    ap.add_argument("--conductor", default="builtin:sim-bucket")
    ap.add_argument("--held-out", choices=["alternate", "all", "none"], default="alternate")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--compare", default="", help="comma-separated other conductors, scored on the same pools and questions")
    ap.add_argument("--rank-questions", type=int, default=5, help="training-side questions per bucket and training pool for the rank lookup")
    ap.add_argument("--training-pool", default="examples/pools/simulated_paper_v3.toml")
    ap.add_argument("--show", choices=WORKER_VIEWS, default=None,
                    help="prompt the conductor with this view of each pool instead of the one it was trained with (a probe of what it reads)")
    ap.add_argument("--profile", choices=list(PROFILES), default=None,
                    help="show every conductor each pool's profile per area or per subtopic (default: as each was trained)")
    ap.add_argument("--profile-questions", type=profile_size_arg, default=None,
                    help="measure each pool's profile on this many questions (default: 960, as sim-pool writes it; more is finer)")
    ap.add_argument("--rank", type=rank_spec, action="append", default=None, metavar="RANKING:PRICE",
                    help="a rank lookup to score (repeatable): over the area's or the subtopic's ranking at that price (default area:0.012)")
    ap.add_argument("--jobs", type=int, default=1, help="score this many pools at a time, a process each (CPU threads shared)")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1 (got {args.jobs})")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not seeds:
        ap.error("--seeds names no pool")
    print("SIMULATED: world v3, generated pools never trained on; accuracy % on", args.n, "held-out questions per pool; "
          "profiles shown: " + ", ".join(f"{c} per {p}" for c, p in profiles(args).items())
          + f", measured on {args.profile_questions or PROFILE_QUESTIONS} questions a pool")
    names = [rank_name(key) for key in dict.fromkeys(lookups(args))]
    others = compared(args)
    print("| seed | held-out families | workers | conductor | best single | oracle router | search re-run |" + "".join(f" {n} |" for n in names)
          + " vs oracle | vs search |" + "".join(f" vs {n} |" for n in names) + " tokens vs MoA |" + "".join(f" {c} |" for c in others))
    print("|---|---|---|---|---|---|---|---|---|---|" + "---|---|" * len(names) + "---|" * len(others))
    start = time.perf_counter()
    pools = []
    for pool in scored_pools(args, seeds):
        pools.append(pool)
        print(row(pool), flush=True)
    lines, missed = summary(pools, time.perf_counter() - start)
    print("\n".join(lines))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
