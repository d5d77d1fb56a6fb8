"""Is there anything for GRPO to learn from a conductor? Its sampled groups, per temperature, on the training pool. SIMULATED.

    PYTHONPATH=src python benchmarks/sim_grpo_signal.py [--conductor builtin:sim-general] [--temperatures 1.0,1.5,2.0]

GRPO moves a policy towards the plans of a group that earned more than the group's mean. That needs (a) more
than one plan in a group, (b) rewards that differ within it, and (c) that the plans rewarded more are the
better ones, not the luckier: a question's reward is one draw of its hidden noise. For each temperature this
samples ``--group`` plans (the rollouts' grammar, as GRPO samples them) for one training-side question per
bucket, runs each on the question (the reward, accuracy alone as in ``sim_general.grpo_run``), and values each
plan by its accuracy over ``--value-questions`` other questions of the same bucket (what it is worth to the
policy). Printed per temperature:

* parsed: plans that parse; plans/group: distinct plans in a group; spread: groups whose rewards differ;
* sample - greedy: the mean value of a sampled plan minus the greedy plan's (what exploring costs);
* best - greedy: the best sampled plan's value minus the greedy plan's (the room a group shows);
* uphill / downhill: groups with spread whose advantages favour the plans of higher (lower) value, by the sign
  of sum_i advantage_i x (value_i - mean value); the rest are flat (one plan, or ties): GRPO's step follows
  the value in the first, against it in the second, and is noise in the rest.

``--worker-slots`` adds what a sampler that explored only the worker slots could find: per question, every
assignment of the pool's workers to the greedy plan's steps (its subtasks and access lists kept), the best of
them chosen on half of the bucket's value questions and scored on the other half, against the greedy plan on
that half (an unbiased estimate of the room a worker-level exploration would reach; no model is sampled).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import replace
from itertools import product
from pathlib import Path
from statistics import mean
from typing import Optional, Sequence

from openconductor.pool import load_pool
from openconductor.sim.plan_search import steps_of
from openconductor.sim.questions import Question
from openconductor.sim.pools import with_profile
from openconductor.sim.world_v3 import Profile, make_questions, run_plan
from openconductor.train.sim_eval import conductor_plans, declared, trained_ranking
from openconductor.workflow import Workflow

ROOT = Path(__file__).resolve().parents[1]


def value(plan: Optional[Workflow], questions: Sequence[Question], profiles: Sequence[Profile]) -> float:
    """Accuracy of ``plan`` over ``questions`` (0 for a plan that does not parse)."""
    if plan is None:
        return 0.0
    steps = steps_of(plan)
    return sum(run_plan(q.text, steps, profiles).correct for q in questions) / len(questions)


def reassigned(plan: Workflow, workers: int) -> list[Workflow]:
    """Every assignment of ``workers`` to ``plan``'s steps, its subtasks and access lists kept."""
    return [replace(plan, steps=tuple(replace(s, worker=w) for s, w in zip(plan.steps, ws)))
            for ws in product(range(workers), repeat=len(plan.steps))]


def worker_slot_room(greedy: Sequence[Optional[Workflow]], questions: Sequence[Sequence[Question]], profiles: Sequence[Profile]) -> str:
    """Markdown: per question, the best re-assignment of the greedy plan's workers, chosen on one half of the
    bucket's questions and scored against the greedy plan on the other."""
    room, better, changed = [], 0, 0
    for plan, pool in zip(greedy, questions):
        if plan is None:
            continue
        choose, score = pool[: len(pool) // 2], pool[len(pool) // 2 :]
        best = max(reassigned(plan, len(profiles)), key=lambda p: (value(p, choose, profiles), p == plan))
        gain = value(best, score, profiles) - value(plan, score, profiles)
        room.append(gain)
        changed += best != plan
        better += gain > 0
    if not room:
        return "no greedy plan parsed: nothing to re-assign"
    return ("| greedy plans | re-assigned (chosen on half) | better on the other half | best re-assignment - greedy (other half) |\n"
            f"|---|---|---|---|\n| {len(room)} | {changed} | {better} | {100 * mean(room):+.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", default="builtin:sim-general")
    ap.add_argument("--pool", type=Path, default=ROOT / "examples" / "pools" / "simulated_paper_v3.toml")
    ap.add_argument("--temperatures", default="1.0,1.5,2.0", help='comma-separated; "" samples nothing (with --worker-slots)')
    ap.add_argument("--group", type=int, default=16, help="plans sampled per question (GRPO's group)")
    ap.add_argument("--questions", type=int, default=48, help="questions, one per bucket (48 buckets)")
    ap.add_argument("--value-questions", type=int, default=200, help="questions of a bucket that value a plan")
    ap.add_argument("--test-n", type=int, default=1000, help="held-out questions kept out (the tables' eval set)")
    ap.add_argument("--worker-slots", action="store_true", help="also: the best re-assignment of the greedy plan's workers")
    args = ap.parse_args()
    from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

    # the pool shown as the conductor's copy showed its pools (a subtopic-ranking conductor's rank words bind only there)
    spec, start = with_profile(load_pool(args.pool), trained_ranking(args.conductor)), time.perf_counter()
    profiles = declared(spec)
    held = frozenset(q.text for q in make_questions(args.test_n, 1000))
    asked = make_questions(48, 11_000, exclude=held)[: args.questions]  # one per bucket, training side
    pool_of_bucket: dict = defaultdict(list)
    for q in make_questions(48 * args.value_questions, 12_000, exclude=held | {q.text for q in asked}):
        pool_of_bucket[q.bucket].append(q)
    model = load_checkpoint(checkpoint_path(args.conductor))
    greedy, _ = conductor_plans(args.conductor, spec, asked, model=model)
    greedy_value = [value(p, pool_of_bucket[q.bucket], profiles) for p, q in zip(greedy, asked)]
    print(f"SIMULATED: world v3, pool {spec.name}, conductor {args.conductor}; {len(asked)} training-side questions "
          f"(one a bucket), {args.group} samples each; a plan's value: its accuracy on {args.value_questions} questions of the bucket")
    print(f"greedy: value {100 * mean(greedy_value):.1f} %, {len({p.steps for p in greedy if p})} distinct plans over {len(asked)} buckets\n")
    if args.worker_slots:
        print(worker_slot_room(greedy, [pool_of_bucket[q.bucket] for q in asked], profiles) + "\n")
    temperatures = [float(x) for x in args.temperatures.split(",") if x.strip()]  # none: the --worker-slots table alone
    if temperatures:
        print("| temperature | parsed | plans/group | spread | reward | sample - greedy | best - greedy | uphill / downhill |\n|---|---|---|---|---|---|---|---|")
    for t in temperatures:
        repeated = [q for q in asked for _ in range(args.group)]
        plans, _ = conductor_plans(args.conductor, spec, repeated, model=model, temperature=t, seed=int(100 * t), batch_size=args.group)
        parsed = distinct = spread = uphill = downhill = 0
        rewards, cost, room = [], [], []
        for i, q in enumerate(asked):
            group = plans[i * args.group : (i + 1) * args.group]
            parsed += sum(p is not None for p in group)
            distinct += len({p.steps for p in group if p is not None})
            cache: dict = {}
            values = [cache.setdefault(p.steps if p else None, value(p, pool_of_bucket[q.bucket], profiles)) for p in group]
            reward = [float(run_plan(q.text, steps_of(p), profiles).correct) if p else 0.0 for p in group]
            rewards += reward
            cost.append(mean(values) - greedy_value[i])
            room.append(max(values) - greedy_value[i])
            if len(set(reward)) > 1:
                spread += 1
                mr, mv = mean(reward), mean(values)
                pull = sum((r - mr) * (v - mv) for r, v in zip(reward, values))
                uphill, downhill = uphill + (pull > 1e-12), downhill + (pull < -1e-12)
        n = len(asked)
        print(f"| {t:.1f} | {100 * parsed / (n * args.group):.0f} % | {distinct / n:.1f} | {spread}/{n} | {100 * mean(rewards):.1f} % | "
              f"{100 * mean(cost):+.1f} | {100 * mean(room):+.1f} | {uphill} / {downhill} |", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
