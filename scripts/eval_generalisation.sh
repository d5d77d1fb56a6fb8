#!/usr/bin/env bash
# Baselines on kinds of question never trained on (openconductor/tasks/kinds.py: HELD_OUT_KINDS, 20 each at
# the held-out seed 4242) and on the everyday questions of our own (the `everyday` task's test split, 55),
# on the offline default pool: every single model, the pool's fixed workflows, MoA, and the pool's conductor
# (the shipped builtin:local-tools; CONDUCTOR=none for the prompted one, CONDUCTOR=RUN/warmup for another,
# POLICIES="-p conductor" to score a conductor alone into an existing folder).
# Grown one question per kind at a time (question K of every kind, then K+1, ...), so an interrupted run
# stays balanced; the everyday questions past the kinds' N follow in one invocation.
# Usage: bash scripts/eval_generalisation.sh OUT_DIR [N_PER_KIND=20] [FIRST=0]   (FIRST: the first question index to run)
# Resumable; with the same response cache (CACHE_PATH) a re-run replays without calling a model.
# THREADS=2 runs the local models on two threads each (faster when nothing else shares the cores).
# POOL=FILE evaluates on that pool file instead of the offline default pool (e.g. the pool without auto_import, docs/results.md).
# LOCK=/tmp/heavy.lock takes that lock for each invocation (not for the whole run), so other heavy jobs on a
# shared machine interleave with it.
set -euo pipefail
OUT=$1; N=${2:-20}; FIRST=${3:-0}
PY=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # the bootstrap venv when there is one
export PYTHONPATH=${PYTHONPATH:-src}
KINDS=$($PY -m openconductor.tasks.kinds held-out)
POLICIES=${POLICIES:-"-p single:* -p fixed:code-then-run -p fixed:code-run-answer -p fixed:search-then-run -p fixed:answer-then-check -p moa -p conductor"}
run() {
  # shellcheck disable=SC2086  # KINDS and POLICIES are lists of flags
  ${LOCK:+flock "$LOCK"} nice -n 19 $PY -m openconductor eval "$@" ${POOL:+--pool "$POOL"} --task-seed 4242 $POLICIES \
      ${CONDUCTOR:+--conductor "$CONDUCTOR"} ${CACHE_PATH:+--cache-path "$CACHE_PATH"} ${THREADS:+--threads "$THREADS"} --concurrency 2 --out "$OUT" \
      --title "offline default pool: held-out kinds and everyday questions"
}
for k in $(seq "$FIRST" $((N - 1))); do
  run $KINDS --task everyday --offset "$k" --limit 1
done
run --task everyday --offset "$N"   # the rest of the everyday test split
