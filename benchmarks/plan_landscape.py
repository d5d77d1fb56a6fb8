"""What GRPO sees at the start: accuracy of the warm-up's own plan distribution, by step count, in the
SIMULATED world v2 (no model; the warm-up's plans are scored through the executor like rollouts).

For each step count k = 1..5 it scores warm-up-style plans (train/warmup.py: chain / fan-out /
plan-then-fan-out shapes, the warm-up's wording) on held-out simulated questions, (a) with workers drawn
uniformly at random, as the warm-up samples them, and (b) with every step given the domain's best
single worker (the routing an ideal policy would have learned). If longer random plans score below
shorter ones, a policy that has not yet learned routing is pushed toward short plans.

    PYTHONPATH=src python benchmarks/plan_landscape.py --n 400
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

from openconductor.evaluation import summarize
from openconductor.policies.baselines import GivenPlans
from openconductor.pool import load_pool
from openconductor.train.config import load_train_config
from openconductor.train.data import load_items
from openconductor.train.evaluate import best_by_domain, held_out_task, run_held_out
from openconductor.train.warmup import PHRASES, _reasoning, shape
from openconductor.workflow import Step, Workflow


def plans(items, k: int, workers: list[str], best: dict[str, str], routed: bool, seed: int) -> list[str]:
    rng = random.Random(f"landscape|{k}|{routed}|{seed}")
    out = []
    for item in items:
        layout = shape(k, fine_grained=False, rng=rng)
        steps = tuple(Step(workers.index(best[item.domain]) if routed else rng.randrange(len(workers)), rng.choice(PHRASES[role]), access)
                      for role, access in layout)
        out.append(Workflow(steps, reasoning=_reasoning([role for role, _ in layout])).render())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--n", type=int, default=400)
    args = ap.parse_args()
    cfg = load_train_config(args.config, {"data.n_eval": args.n})
    spec = load_pool(cfg.pool_path)
    items = load_items(cfg, held_out=True)[: args.n]
    domains = sorted({i.domain for i in items})
    best = best_by_domain(spec, domains)
    task = held_out_task(items)
    workers = [w.name for w in spec.workers]
    print(f"SIMULATED world, {len(items)} held-out questions; warm-up plan shapes and wording; accuracy")
    print("| steps | random workers | " + " / ".join(domains) + " | every step the domain's best worker | " + " / ".join(domains) + " |")
    print("|---|---|---|---|---|")
    for k in range(1, cfg.prompt.max_steps + 1):
        row = []
        for routed in (False, True):
            texts = {i.question: t for i, t in zip(items, plans(items, k, workers, best, routed, 0))}
            records = asyncio.run(run_held_out(task, "plans", GivenPlans(texts, max_steps=cfg.prompt.max_steps), spec))
            [summary] = summarize(records)
            row.append((summary.accuracy, [summary.domains[d].accuracy for d in domains]))
        (rand, per), (routed, per_routed) = row
        print(f"| {k} | {100 * rand:.1f} | " + " / ".join(f"{100 * p:.1f}" for p in per) + f" | {100 * routed:.1f} | "
              + " / ".join(f"{100 * p:.1f}" for p in per_routed) + " |", flush=True)


if __name__ == "__main__":
    main()
