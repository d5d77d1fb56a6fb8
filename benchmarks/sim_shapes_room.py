"""Is there room outside the search's five plan shapes? SIMULATED; no model is run.

    PYTHONPATH=src python benchmarks/sim_shapes_room.py [--top 3] [--max-steps 3]

Every lookup table, every copy's targets and ``sim_headroom.py``'s ceiling choose among five plan shapes (one
worker; solve -> check; plan -> implement; plan -> implement -> check; two solvers -> aggregator;
``plan_search.candidate_plans``). A conductor writes any plan of up to ``max_steps`` steps (3 in the shipped pools),
with any role and access list a step may have, so GRPO could in principle find plans that no table holds. This
probe asks whether such plans are worth anything in world v3: per bucket of the training pool, *every* plan of up
to ``--max-steps`` steps over the bucket's ``--top`` best workers alone (each step: a worker, a role of plan,
solve, check or combine, and which earlier steps it sees; the last step answers; ``every_plan``) is screened on
``--screen`` training-side questions, the ``--keep`` best are ranked on all ``--ceiling-questions``, and the winner
is scored on the held-out questions. Beside it, chosen the same way: the five shapes over the same workers (a
subset of every plan, so the margin is what leaving the shapes buys) and over every worker (the tables so far).
Same price as the search (0.012 per 1,000 tokens). Choosing among thousands of plans on a few hundred questions
favours the lucky ones; the held-out margin is what counts.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from openconductor.pool import load_pool
from openconductor.sim.plan_search import (AGGREGATE, CHECK, IMPLEMENT, PLAN, SOLVE, SearchSettings, at_ranks, best_alone, candidate_plans,
                                           exhaustive_group, steps_of)
from openconductor.sim.world_v3 import make_questions, role_of, run_plan
from openconductor.train.sim_eval import declared, pooled_bootstrap
from openconductor.workflow import Step, Workflow

ROOT = Path(__file__).resolve().parents[1]
TRAINING_POOL = ROOT / "examples" / "pools" / "simulated_paper_v3.toml"
PRICE = SearchSettings.token_weight
ROLES = {"plan": PLAN, "solve": SOLVE, "check": CHECK, "combine": AGGREGATE}


def every_plan(workers: Sequence[int], max_steps: int) -> list[Workflow]:
    """Every plan of 1..max_steps steps over ``workers``: each step a worker, a role and the earlier steps it sees
    (none, all, or any other subset); the last step does not only plan. A check or a combination sees at least one
    earlier step (one that sees none answers as a solve does, ``form``); a step that sees every earlier step says
    "all", never the same set by index."""
    out: list[Workflow] = []

    def extend(prefix: tuple[Step, ...]) -> None:
        i = len(prefix)
        subsets = [()] + [s for r in range(1, i + 1) for s in itertools.combinations(range(i), r)]
        for w in workers:
            for role, subtask in ROLES.items():
                for seen in subsets:
                    if role in ("check", "combine") and not seen:
                        continue
                    plan = prefix + (Step(w, subtask, "all" if i and len(seen) == i else seen),)
                    if role != "plan":
                        out.append(Workflow(plan))
                    if len(plan) < max_steps:
                        extend(plan)

    extend(())
    return out


def form(plan: Workflow) -> tuple:
    """A plan as the world reads it, for telling which plans the five shapes hold: each step's worker, role and
    access, where an "implement" step is a solve, a check or combination that sees nothing is a solve, and a check
    and a combination are one role (``world.decide`` treats them alike but for their noise)."""
    out = []
    for s in plan.steps:
        role = role_of(s.subtask)
        role = "solve" if role in ("check", "aggregate") and not s.access else "review" if role in ("check", "aggregate") else role
        out.append((s.worker, role, s.access))
    return tuple(out)


def shape(plan: Workflow, names: Sequence[str]) -> str:
    """A plan in a line: each step's worker, role and what it sees ("all", or earlier steps by index)."""
    role = {**{v: k for k, v in ROLES.items()}, IMPLEMENT: "implement"}
    seen = lambda a: "" if not a else " sees all" if a == "all" else " sees " + ",".join(map(str, a))  # noqa: E731
    return " -> ".join(f"{names[s.worker]} {role[s.subtask]}{seen(s.access)}" for s in plan.steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=Path, default=TRAINING_POOL)
    ap.add_argument("--n", type=int, default=1000, help="held-out questions")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--ceiling-questions", type=int, default=300, help="training-side questions a bucket")
    ap.add_argument("--top", type=int, default=3, help="a bucket's best workers alone (on the screen) that every plan draws from")
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--screen", type=int, default=30)
    ap.add_argument("--keep", type=int, default=48)
    args = ap.parse_args()
    start = time.perf_counter()
    spec = load_pool(args.pool)
    profiles = declared(spec)
    held = make_questions(args.n, args.eval_seed)
    side = make_questions(48 * args.ceiling_questions, 7_000, exclude=frozenset(q.text for q in held))
    train_by: dict = defaultdict(list)
    for q in side:
        train_by[q.bucket].append(q)
    names = [w.name for w in spec.workers]
    five = candidate_plans(len(profiles))
    rows = {"the five shapes over every worker (the tables so far)": {}, f"the five shapes over the bucket's {args.top} best": {},
            f"every plan of up to {args.max_steps} steps over the bucket's {args.top} best": {}}
    outside: dict = {}
    for bucket, asked in train_by.items():
        workers = best_alone(profiles, asked[:args.screen], args.top)
        top_five = [at_ranks(p, workers) for p in candidate_plans(len(workers))]
        for table, plans in zip(rows.values(), (five, top_five, every_plan(workers, args.max_steps))):
            table[bucket] = exhaustive_group(profiles, asked, screen=args.screen, keep=args.keep, token_weight=PRICE, plans=plans).plan
        if form(rows[f"every plan of up to {args.max_steps} steps over the bucket's {args.top} best"][bucket]) not in {form(p) for p in top_five}:
            outside[bucket] = [table[bucket] for table in rows.values()]
    scored = {}
    for name, table in rows.items():
        runs = [run_plan(q.text, steps_of(table[q.bucket]), profiles) for q in held]
        scored[name] = ([int(r.correct) for r in runs], [r.tokens for r in runs])
    first, top, every = scored.values()
    print(f"SIMULATED: world v3, pool {spec.name}, {args.n} held-out questions (eval seed {args.eval_seed}); per bucket chosen on "
          f"{args.ceiling_questions} training-side questions at {PRICE} per 1,000 tokens (screen {args.screen}, {args.keep} kept; "
          f"{len(every_plan(range(args.top), args.max_steps)):,} plans a bucket over {args.top} workers)")
    print("| per-bucket table over | accuracy | tokens/q | vs the five shapes over every worker | vs the five shapes over the same workers |\n|---|---|---|---|---|")
    for name, (correct, tokens) in scored.items():
        vs = [pooled_bootstrap([(correct, other[0])]) for other in (first, top)]
        cells = " | ".join("" if correct is other[0] else "{:+.1f} [{:+.1f}, {:+.1f}]".format(*m) for m, other in zip(vs, (first, top)))
        print(f"| {name} | {100 * sum(correct) / len(held):.1f} | {sum(tokens) / len(held):,.0f} | {cells} |")
    print(f"\n{len(outside)} of {len(train_by)} buckets chose a plan outside the five shapes over the same workers "
          f"({time.perf_counter() - start:.0f} s); per bucket, its plan and the five-shape tables' (every worker; the same workers):")
    for bucket in sorted(outside):
        every_plan_, five_all, five_top = outside[bucket][2], outside[bucket][0], outside[bucket][1]
        print(f"  {bucket}: {shape(every_plan_, names)}  ({shape(five_all, names)}; {shape(five_top, names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
