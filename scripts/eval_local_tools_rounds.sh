#!/usr/bin/env bash
# The same evaluation as eval_local_tools.sh, grown one question per kind at a time (question K of every
# task, then K+1, ...), so that an interrupted run stays balanced across the five kinds.
# Usage: bash scripts/eval_local_tools_rounds.sh OUT_DIR FIRST LAST    (question indices, inclusive)
# CONDUCTOR=none: the untrained prompted conductor instead of the pool's shipped trained one.
set -euo pipefail
OUT=$1; FIRST=$2; LAST=$3
PY=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # the bootstrap venv when there is one
export PYTHONPATH=${PYTHONPATH:-src}
for k in $(seq "$FIRST" "$LAST"); do
  nice -n 19 $PY -m openconductor eval \
      --task basic_arithmetic --task gsm_symbolic --task rg:letter_counting --task rg:simple_equations --task rg:syllogism \
      --task-seed 4242 --offset "$k" --limit 1 \
      -p 'single:*' -p fixed:code-then-run -p fixed:code-run-answer -p fixed:search-then-run -p fixed:answer-then-check -p conductor \
      ${CONDUCTOR:+--conductor "$CONDUCTOR"} ${CACHE_PATH:+--cache-path "$CACHE_PATH"} --concurrency 2 --out "$OUT"
done
