#!/usr/bin/env bash
# Baselines on the offline default pool (Qwen2.5-Coder-0.5B, SmolLM2-135M, the python tool) over five
# kinds of reasoning-gym questions: every single model, the fixed workflows declared in the pool file,
# and the pool's conductor (the shipped trained one; CONDUCTOR=none for the untrained prompted one,
# CONDUCTOR=RUN/final for another). Generator seed 4242 is the HELD-OUT evaluation seed: do not
# train on it (the trainer's defaults are 0 and 1000).
# Usage: bash scripts/eval_local_tools.sh [OUT_DIR] [N_PER_TASK]
# Resumable; with the same response cache a re-run replays without calling a model.
set -euo pipefail
OUT=${1:-runs/local-tools-eval}
N=${2:-4}
PY=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # the bootstrap venv when there is one
export PYTHONPATH=${PYTHONPATH:-src}
nice -n 19 $PY -m openconductor eval \
    --task basic_arithmetic --task gsm_symbolic --task rg:letter_counting --task rg:simple_equations --task rg:syllogism \
    --task-seed 4242 --limit "$N" \
    -p 'single:*' -p fixed:code-then-run -p fixed:code-run-answer -p fixed:search-then-run -p fixed:answer-then-check -p conductor \
    ${CONDUCTOR:+--conductor "$CONDUCTOR"} ${CACHE_PATH:+--cache-path "$CACHE_PATH"} --concurrency 2 --out "$OUT" --title "offline default pool (Qwen2.5-Coder-0.5B, SmolLM2-135M, python tool)"
