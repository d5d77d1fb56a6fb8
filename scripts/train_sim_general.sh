#!/usr/bin/env bash
# The general conductor for SIMULATED world-v3 pools, end to end on 2 CPU cores (docs/simulation.md, "Fifth
# step"): the rank-lookup recipe (workers named by their place in the pool's measured ranking), its copy
# targets "mixed" (the training pool's own searched plans, the rank lookup's on the 60 generated pools),
# a time-boxed copy (SmolLM2-135M + LoRA), then its table on the training pool and on unseen pools.
#   bash scripts/train_sim_general.sh [RUN_DIR] [UNSEEN_SEEDS]
# Env: COPY_MAX_MIN (the copy's time box, default 50 minutes), PYTHON. About 2 h in all on an idle 2-core machine.
# Every number it prints is SIMULATED.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$(realpath -m "${1:-runs/sim-general}")
SEEDS=${2:-$(seq -s, 901 920)}
PY=${PYTHON:-.venv/bin/python}
CONFIG=examples/train_sim_general_ranks.toml
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$RUN"
"$PY" -m openconductor.train.sim_general "$CONFIG" --stage search --targets mixed --output-dir "$RUN" 2>&1 | tee "$RUN/search.log"
"$PY" -m openconductor.train.sim_general "$CONFIG" --stage copy --targets mixed --copy-data "$RUN/copy_data.json.gz" --output-dir "$RUN" \
    --epochs 1 --batch-size 8 --copy-max-minutes "${COPY_MAX_MIN:-50}" 2>&1 | tee "$RUN/copy.log"
"$PY" benchmarks/sim_training_pool.py --conductor "$RUN/warmup" --n 1000 | tee "$RUN/training_pool_table.md" || true
"$PY" benchmarks/unseen_pools.py --seeds "$SEEDS" --n 64 --conductor "$RUN/warmup" | tee "$RUN/unseen_pools_table.md"
