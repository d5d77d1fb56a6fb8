"""Planning with a trained conductor at run time: its llama.cpp copy (conductor.gguf) vs torch, side by side.

Plans only (no worker runs), one question at a time as `conductor ask` does, greedy, on held-out
SIMULATED questions of the training config. Prints seconds per plan for each engine (measured in the
same run, alternating per question, each model loaded once before timing), and how often each engine's plan is the plan the held-out table
scored (train/evaluate.py: torch, batched, the training automaton).

    PYTHONPATH=src python benchmarks/trained_planning.py runs/cpu-smollm2/final --n 20

The checkpoint needs conductor.gguf (`conductor train` writes it; `conductor export-gguf DIR` for
older checkpoints).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from pathlib import Path

from openconductor import Pool
from openconductor.pool import load_pool
from openconductor.policies.base import PlanRequest
from openconductor.policies.lm import LMConductor
from openconductor.conductor.checkpoint import trained_conductor
from openconductor.train.config import load_train_config
from openconductor.train.data import load_items
from openconductor.train.evaluate import conductor_texts
from openconductor.workflow import parse_and_validate


async def plan_side_by_side(engines: dict, questions: list[str], max_steps: int) -> dict:
    """{engine: (plans, seconds)}; each engine's pool stays open (models load once, before timing)."""
    results = {e: ([], []) for e in engines}
    async with contextlib.AsyncExitStack() as stack:
        pools = {e: await stack.enter_async_context(Pool(spec)) for e, (spec, _) in engines.items()}
        policies = {e: LMConductor(temperature=0.0, examples=options["examples"]) for e, (_, options) in engines.items()}
        for e in engines:  # untimed: loads each engine's model
            await policies[e].plan(PlanRequest(questions[0], pools[e], max_steps=max_steps, seed=0))
        for q in questions:  # alternate engines per question so machine load falls on both alike
            for e in engines:
                start = time.perf_counter()
                plan = await policies[e].plan(PlanRequest(q, pools[e], max_steps=max_steps, seed=0))
                results[e][1].append(time.perf_counter() - start)
                results[e][0].append(plan.workflow)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    cfg = load_train_config(args.config, {"data.n_eval": args.n})
    items = load_items(cfg, held_out=True)[: args.n]
    base = load_pool(cfg.pool_path)
    reference, _ = conductor_texts(str(args.checkpoint), items, base, cfg, temperature=0.0, batch_size=8, seed=0)
    reference = [parse_and_validate(t, len(base.workers), max_steps=cfg.prompt.max_steps) for t in reference]
    engines = {e: trained_conductor(base, args.checkpoint, engine=e) for e in ("llama.cpp", "transformers")}
    results = asyncio.run(plan_side_by_side(engines, [i.question for i in items], cfg.prompt.max_steps))
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
