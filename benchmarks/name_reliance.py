"""Does a general conductor pick workers by what the pool says about them, or by names it remembers? SIMULATED.

    PYTHONPATH=src python benchmarks/name_reliance.py [--conductor builtin:sim-general] [--seed 904] [--n 24]

On the training-family pool ``generate_pool(SEED)``, the conductor plans N held-out questions (world v3) for
variants of the pool that differ in one thing each: as generated; the worker it calls first most often
moved to id 0; that worker renamed (its description saying the new name); its description replaced by a
plain one with the same grades; that worker removed; every worker renamed with fresh names
(``sim.pools.renamed``). Printed per variant: the workers called first, over all questions and over the
math ones. A conductor that reads descriptions keeps its choices when a name changes and changes them
when the description does. Every number is SIMULATED.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys

from openconductor.pool import PoolSpec
from openconductor.sim.pools import generate_pool, pool_spec, renamed
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import conductor_plans


def firsts(checkpoint: str, spec: PoolSpec, questions, model) -> tuple[collections.Counter, collections.Counter]:
    plans, _ = conductor_plans(checkpoint, spec, questions, model=model)
    first = [spec.workers[p.steps[0].worker].name if p else "(no plan)" for p in plans]
    return collections.Counter(first), collections.Counter(f for f, q in zip(first, questions) if q.domain == "math")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conductor", default="builtin:sim-general")
    ap.add_argument("--seed", type=int, default=904)
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--eval-seed", type=int, default=1000)
    args = ap.parse_args()
    from openconductor.conductor.checkpoint import checkpoint_path, load_checkpoint

    model = load_checkpoint(checkpoint_path(args.conductor))
    questions = make_questions(args.n, args.eval_seed)
    spec = pool_spec(generate_pool(args.seed))
    counts, _ = firsts(args.conductor, spec, questions, model)
    top = spec.index(counts.most_common(1)[0][0])
    w = spec.workers[top]
    others = [x for i, x in enumerate(spec.workers) if i != top]
    new_name = renamed(spec, random.Random(0)).workers[top].name
    grades = w.description.split(". ")
    plain = ". ".join(s for s in grades if "at " in s or ": " in s or "Skill" in s) or w.description

    def top_changed(**update) -> PoolSpec:  # the pool with only its favourite worker changed
        return spec.model_copy(update={"workers": [x.model_copy(update=update) if i == top else x for i, x in enumerate(spec.workers)]})

    variants = [
        ("as generated", spec),
        (f"{w.name} moved to id 0", spec.model_copy(update={"workers": [w] + others})),
        (f"{w.name} renamed {new_name}", top_changed(name=new_name, description=w.description.replace(w.name, new_name))),
        (f"{w.name} with a plain description", top_changed(description=plain)),
        (f"{w.name} removed", spec.model_copy(update={"workers": others})),
        ("every worker renamed", renamed(spec, random.Random(1))),
    ]
    print(f"SIMULATED: world v3, pool {spec.name} ({', '.join(x.name for x in spec.workers)}), {args.n} held-out questions, conductor {args.conductor}")
    print(f"{w.name}: {w.description}")
    print("| variant | first worker, all questions | first worker, math questions |")
    print("|---|---|---|")
    for label, variant in variants:
        every, math = firsts(args.conductor, variant, questions, model)
        print(f"| {label} | {dict(every.most_common(4))} | {dict(math.most_common(3))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
