"""A general conductor on SIMULATED pools it never saw, against each pool's baselines. Every number is SIMULATED.

    PYTHONPATH=src python benchmarks/unseen_pools.py --seeds 901,902,...,920 --n 96 [--conductor CKPT] [--compare CKPT,...]

For each seed: the pool `generate_pool(seed, held_out=...)` (every other seed, starting with the second,
draws from every family with at least one held out of training), N held-out questions (world v3), and on
them: the conductor (default builtin:sim-general; greedy, pool shown by descriptions), the pool's best single
worker and oracle per-domain router (declared accuracies), MoA (7 proposers + random aggregator; tokens
only matter here) and the per-pool search re-run (sim/plan_search.py, one plan per bucket, found on
training-side questions: what a lookup reaches with its own search budget), and the rank lookup: one plan per
bucket over ranks ("plan with the best of the question's area, check with the second"), found across the 60
generated training pools and the training pool (``sim_eval.rank_table``), the lookup a conductor that reads the
measured ranking could reach on any pool without learning it. Prints one row per pool and a
last line with the mean margins over pools and 95 % intervals (each pool's questions resampled); exits 1
when a goal is missed: mean >= oracle router + 2, >= search re-run - 2, tokens <= 0.25x MoA's. ``--compare``:
other conductors on the same pools and questions, a column each, and the conductor's paired margin over each.
``--show VIEW``: the conductor is prompted with that view of each pool instead of the one it was trained with
(``pool.PoolView``; e.g. ``ranking``, the names and measured ranking without descriptions), a probe of what it reads.
Each conductor sees each pool's profile measured as its copy's training pools were (per area, or per subtopic:
``sim_eval.trained_ranking``; ``--profile`` overrides), measured on ``--profile-questions`` questions a pool (960 by
default, the pool files' own; the rank lookups read the same measurement). ``--rank RANKING:PRICE`` (repeatable; default area:0.012):
the rank lookups to score, over the area's or the subtopic's ranking at that token price, a column and a margin each.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from openconductor.pool import WORKER_VIEWS
from openconductor.sim.plan_search import BUCKET
from openconductor.sim.world_v3 import make_questions
from openconductor.sim.plan_search import SearchSettings
from openconductor.sim.pools import PROFILE_QUESTIONS, PROFILES, RANKINGS, profile_size_arg, with_profile
from openconductor.train.sim_eval import conductor_plans, pooled_bootstrap, rank_lookup_plans, run_plans, trained_ranking, unseen_pools
from openconductor.train.sim_general import CopySettings, rank_lookup_table


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="comma-separated pool seeds")
    ap.add_argument("--n", type=int, default=96, help="held-out questions per pool")
    ap.add_argument("--conductor", default="builtin:sim-general")
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
    args = ap.parse_args()
    lookups = args.rank or [("area", SearchSettings.token_weight)]
    from openconductor.providers.transformers_local import checkpoint_path, load_checkpoint

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    model = load_checkpoint(checkpoint_path(args.conductor))
    others = {c: load_checkpoint(checkpoint_path(c)) for c in args.compare.split(",") if c.strip()}
    questions = make_questions(args.n, args.eval_seed)
    held_out = frozenset(q.text for q in questions)
    tables = {(r, p): rank_lookup_table(Path(args.training_pool), held_out, CopySettings(rank_questions=args.rank_questions,
                                                                                         search=SearchSettings(token_weight=p)), r)
              for r, p in dict.fromkeys(lookups)}
    names = {key: f"rank lookup ({key[0]}, {key[1]:g})" for key in tables}
    profiles = {c: args.profile or trained_ranking(c) for c in [args.conductor, *others]}
    print("SIMULATED: world v3, generated pools never trained on; accuracy % on", args.n, "held-out questions per pool; "
          "profiles shown: " + ", ".join(f"{c} per {p}" for c, p in profiles.items())
          + f", measured on {args.profile_questions or PROFILE_QUESTIONS} questions a pool")
    extra = "".join(f" {c} |" for c in others)
    ranked = "".join(f" {n} |" for n in names.values())
    print(f"| seed | held-out families | workers | conductor | best single | oracle router | search re-run |{ranked} vs oracle | vs search |"
          + "".join(f" vs {n} |" for n in names.values()) + f" tokens vs MoA |{extra}")
    print("|---|---|---|---|---|---|---|---|---|---|" + "---|---|" * len(names) + "---|" * len(others))
    pairs_single, pairs_router, pairs_search, ratios, own_ratios = [], [], [], [], []
    pairs_rank: dict = {key: [] for key in tables}
    rank_results: dict = {key: [] for key in tables}
    pairs_other: dict[str, list] = {c: [] for c in others}
    start = time.perf_counter()
    for unseen in unseen_pools(seeds, questions, held_out=args.held_out):
        spec, best, router, search, moa = unseen.spec, unseen.best_single, unseen.router, unseen.search, unseen.moa
        shown = {c: with_profile(spec, p, args.profile_questions) for c, p in profiles.items()}  # ids and workers as in spec: only the ranking lines differ
        measured = {r: with_profile(spec, r, args.profile_questions) for r, _ in tables}  # what each rank lookup's places are over
        plans, own = conductor_plans(args.conductor, shown[args.conductor], questions, model=model, show=args.show)
        conductor = run_plans("conductor", spec, questions, plans, own)
        ranks = {key: run_plans(names[key], spec, questions, rank_lookup_plans(measured[key[0]], questions, table, BUCKET, key[0])) for key, table in tables.items()}
        pairs_single.append((conductor.correct, best.correct))
        pairs_router.append((conductor.correct, router.correct))
        pairs_search.append((conductor.correct, search.correct))
        for key, rank in ranks.items():
            pairs_rank[key].append((conductor.correct, rank.correct))
            rank_results[key].append((rank, router, search, moa))
        ratios.append(conductor.mean_tokens / moa.mean_tokens)
        own_ratios.append(sum(own) / len(own) / moa.mean_tokens)
        compared = ""
        for c, m in others.items():
            other = run_plans(c, spec, questions, *conductor_plans(c, shown[c], questions, model=m))
            pairs_other[c].append((conductor.correct, other.correct))
            compared += f" {other.accuracy:.1f} |"
        families = ", ".join(sorted({f for f in unseen.pool.families if unseen.held_out and f in ("verifier", "quant")})) or "—"
        print(f"| {unseen.seed} | {families} | {len(unseen.pool.workers)} | {conductor.accuracy:.1f} | {best.accuracy:.1f} | {router.accuracy:.1f} | {search.accuracy:.1f} |"
              + "".join(f" {r.accuracy:.1f} |" for r in ranks.values())
              + f" {conductor.accuracy - router.accuracy:+.1f} | {conductor.accuracy - search.accuracy:+.1f} |"
              + "".join(f" {conductor.accuracy - r.accuracy:+.1f} |" for r in ranks.values()) + f" {ratios[-1]:.3f}x |{compared}", flush=True)
    m_1, lo_1, hi_1 = pooled_bootstrap(pairs_single)
    m_r, lo_r, hi_r = pooled_bootstrap(pairs_router)
    m_s, lo_s, hi_s = pooled_bootstrap(pairs_search)
    ratio = sum(ratios) / len(ratios)
    vs_ranks = "".join("; vs {} {:+.1f} [{:+.1f}, {:+.1f}]".format(names[key], *pooled_bootstrap(pairs)) for key, pairs in pairs_rank.items())
    print(f"\n{len(seeds)} pools, {time.perf_counter() - start:.0f} s. Mean over pools: conductor vs best single {m_1:+.1f} [{lo_1:+.1f}, {hi_1:+.1f}]; vs oracle router {m_r:+.1f} [{lo_r:+.1f}, {hi_r:+.1f}] "
          f"(goal >= +2); vs per-pool search re-run {m_s:+.1f} [{lo_s:+.1f}, {hi_s:+.1f}] (goal >= -2){vs_ranks}; "
          f"tokens {ratio:.3f}x MoA (goal <= 0.25x; of which the conductor's own prompt and plan {sum(own_ratios) / len(own_ratios):.3f}x)")
    for key, rows in rank_results.items():
        m_kr, lo_kr, hi_kr = pooled_bootstrap([(k.correct, r.correct) for k, r, _, _ in rows])
        m_ks, lo_ks, hi_ks = pooled_bootstrap([(k.correct, s.correct) for k, _, s, _ in rows])
        print(f"{names[key]}: vs oracle router {m_kr:+.1f} [{lo_kr:+.1f}, {hi_kr:+.1f}]; vs per-pool search re-run {m_ks:+.1f} [{lo_ks:+.1f}, {hi_ks:+.1f}]; "
              f"tokens {sum(k.mean_tokens / m.mean_tokens for k, _, _, m in rows) / len(rows):.3f}x MoA")
    for c, pairs in pairs_other.items():
        m_c, lo_c, hi_c = pooled_bootstrap(pairs)
        print(f"conductor vs {c}: {m_c:+.1f} [{lo_c:+.1f}, {hi_c:+.1f}]")
    missed = m_r < 2.0 or m_s < -2.0 or ratio > 0.25
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
