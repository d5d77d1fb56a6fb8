#!/usr/bin/env bash
# Train SmolLM2-135M as a conductor on 2 CPU cores against the SIMULATED world (examples/pools/
# simulated_paper.toml), then score it on held-out questions beside the baselines.
#   bash scripts/train_cpu_smollm2.sh [RUN_DIR] [HELD_OUT_N] [extra `conductor train` flags...]
# e.g. bash scripts/train_cpu_smollm2.sh runs/cpu-smollm2 400 --set run.max_minutes=95
# All numbers it prints are SIMULATED (the world's workers, not real models).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$(realpath -m "${1:-runs/cpu-smollm2}")
N=${2:-400}
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
"$PY" -m openconductor train examples/train_cpu_smollm2.toml --set "run.output_dir=$RUN" "${@:3}"
# The untrained row is skipped (it writes almost no parseable plan; see docs/training.md).
"$PY" benchmarks/train_cpu_eval.py "$RUN" --n-eval "$N" --only warmup --only final --threads 2 | tee "$RUN/eval_table.md"
