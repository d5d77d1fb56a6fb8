"""Planning with a trained conductor at run time: its llama.cpp copy (conductor.gguf) vs torch, side by side.

Plans only (no worker runs), one question at a time as `conductor ask` does, greedy, on held-out
SIMULATED questions of the training config. Prints seconds per plan for each engine (measured in the
same run, alternating per question), and how often each engine's plan is the plan the held-out table
scored (train/evaluate.py: torch, batched, the training automaton).

    PYTHONPATH=src python benchmarks/trained_planning.py runs/cpu-smollm2/final --n 20

The checkpoint needs conductor.gguf (`conductor train` writes it; `conductor export-gguf DIR` for
older checkpoints).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from openconductor import Pool
from openconductor.pool import load_pool
from openconductor.policies.base import PlanRequest
from openconductor.policies.lm import LMConductor
from openconductor.providers.transformers_local import trained_conductor
from openconductor.train.config import load_train_config
from openconductor.train.data import load_items
from openconductor.train.evaluate import conductor_texts
from openconductor.workflow import parse_and_validate


async def plan_all(spec, questions: list[str], max_steps: int, examples: bool) -> tuple[list, list[float]]:
    policy = LMConductor(temperature=0.0, examples=examples)
    plans, seconds = [], []
    async with Pool(spec) as pool:
        for q in questions:
            start = time.perf_counter()
            plan = await policy.plan(PlanRequest(q, pool, max_steps=max_steps, seed=0))
            seconds.append(time.perf_counter() - start)
            plans.append(plan.workflow)
    return plans, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    cfg = load_train_config(args.config, {"data.n_eval": args.n})
    items = load_items(cfg, held_out=True)[: args.n]
    base = load_pool(cfg.path(cfg.pool))
    reference, _ = conductor_texts(str(args.checkpoint), items, base, cfg, temperature=0.0, batch_size=8, seed=0)
    reference = [parse_and_validate(t, len(base.workers), max_steps=cfg.prompt.max_steps) for t in reference]
    engines = {e: trained_conductor(base, args.checkpoint, engine=e) for e in ("llama.cpp", "transformers")}
    results = {e: ([], []) for e in engines}
    for item in items:  # alternate engines per question so machine load falls on both alike
        for engine, (spec, options) in engines.items():
            plans, seconds = asyncio.run(plan_all(spec, [item.question], cfg.prompt.max_steps, options["examples"]))
            results[engine][0].extend(plans)
            results[engine][1].extend(seconds)
    print(f"{args.checkpoint}: {len(items)} held-out SIMULATED questions, greedy, one plan at a time")
    print("| engine | median s/plan | mean s/plan | same plan as the held-out table's |")
    print("|---|---|---|---|")
    medians = {}
    for engine, (plans, seconds) in results.items():
        same = sum(p == r for p, r in zip(plans, reference))
        medians[engine] = statistics.median(seconds)
        print(f"| {engine} | {medians[engine]:.2f} | {statistics.mean(seconds):.2f} | {same}/{len(items)} |")
    print(f"llama.cpp / torch median time: {medians['llama.cpp'] / medians['transformers']:.2f}")


if __name__ == "__main__":
    main()
