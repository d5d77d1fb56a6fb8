"""Before/after table of a training run: ``conductor train-eval CONFIG --run RUN_DIR`` under its older
command line, kept so the commands of earlier runs (docs/history.md) still run (prefer the CLI).

    PYTHONPATH=src python benchmarks/train_cpu_eval.py runs/cpu-smollm2 [--n 48]
    PYTHONPATH=src python benchmarks/train_cpu_eval.py runs/gpu-smollm2 --config examples/train_gpu_smollm2.toml --batch-size 64

Rows: the best single worker, an oracle single-step router, Mixture-of-Agents, the untrained model, the
conductor after the format warm-up only (RUN/warmup) and after GRPO (RUN/final). On the simulated pool
every number is SIMULATED.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def command_line(argv: list[str]) -> list[str]:
    """This script's arguments as ``conductor train-eval``'s."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chains", type=int, nargs="*", default=[], metavar="K")
    ap.add_argument("--no-moa", action="store_true")
    args, rest = ap.parse_known_args(argv)
    out = ["train-eval", str(args.config), "--run", str(args.run_dir), "--threads", str(args.threads), *rest]
    out += [arg for k in args.chains for arg in ("--chains", str(k))]
    return out + (["--no-moa"] if args.no_moa else [])


if __name__ == "__main__":
    from openconductor.cli import app

    sys.exit(app(command_line(sys.argv[1:])))
