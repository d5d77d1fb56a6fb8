#!/usr/bin/env bash
# The measured table in docs/evaluation.md: every baseline on the offline local pool (tiny GGUF
# models in-process) on reasoning-gym basic_arithmetic (2 one-digit terms, '+'), 30 test questions.
#   1. single-worker results on a disjoint training split (generator seed 1000; seeds are per item, so nearby seeds overlap) -> train the router
#   2. every policy on the test split (generator seed 0)
# Resumable: re-running skips finished runs; with the response cache it replays for free.
# Usage: bash scripts/eval_local_tiny.sh [OUT_DIR] [N_TEST] [N_TRAIN]
set -euo pipefail
OUT=${1:-runs/local-tiny}
N_TEST=${2:-30}
N_TRAIN=${3:-30}
PY=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # the bootstrap venv when there is one
export PYTHONPATH=${PYTHONPATH:-src}
POOL=examples/pools/local_tiny.toml  # the default pool when this table was measured
TASK=(--task basic_arithmetic --task-option min_terms=2 --task-option max_terms=2 --task-option max_digits=1
      --task-option 'operators=["+"]' --task-option allow_negation=false --task-option allow_parentheses=false)

$PY -m openconductor eval "${TASK[@]}" --pool $POOL --task-seed 1000 --limit "$N_TRAIN" -p 'single:*' \
    --concurrency 4 --out "$OUT/router-train" --title "router training split"
$PY -m openconductor router-train "$OUT/router-train/results.jsonl" --out "$OUT/router.npz"
$PY -m openconductor eval "${TASK[@]}" --pool $POOL --task-seed 0 --limit "$N_TEST" \
    -p 'single:*' -p self-reflection -p moa -p random -p "router:$OUT/router.npz" -p conductor \
    --concurrency 4 --out "$OUT" --title "tiny local models (135M/270M)"
