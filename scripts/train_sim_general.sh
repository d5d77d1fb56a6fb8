#!/usr/bin/env bash
# The general conductor for SIMULATED world-v3 pools, end to end (docs/simulation.md): search-and-copy across
# generated pools (SmolLM2-135M + LoRA, 2 CPU cores), then its table on the training pool and on unseen pools.
#   bash scripts/train_sim_general.sh [RUN_DIR] [POOLS] [UNSEEN_SEEDS]
# Every number it prints is SIMULATED.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$(realpath -m "${1:-runs/sim-general}")
POOLS=${2:-60}
SEEDS=${3:-$(seq -s, 901 920)}
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$(dirname "$RUN")"
"$PY" -m openconductor.train.sim_general examples/train_sim_general.toml --pools "$POOLS" --output-dir "$RUN" 2>&1 | tee "$RUN.copy.log"
"$PY" benchmarks/sim_training_pool.py --conductor "$RUN/warmup" --n 1000 | tee "$RUN/training_pool_table.md" || true
"$PY" benchmarks/unseen_pools.py --seeds "$SEEDS" --n 96 --conductor "$RUN/warmup" | tee "$RUN/unseen_pools_table.md"
