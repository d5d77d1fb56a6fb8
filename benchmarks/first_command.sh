#!/usr/bin/env bash
# README command 1 as a new user runs it: a fresh clone, `bash scripts/bootstrap.sh local && .venv/bin/conductor ask`,
# timed from the clone to the answer. Prints the seconds, the run's status and whether the python tool was sandboxed.
#   bash benchmarks/first_command.sh   (the pip downloads come from the package index, or PIP_FIND_LINKS)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
git clone -q "$src" "$dir/openconductor"
cd "$dir/openconductor"
start=$(date +%s.%N)
bash scripts/bootstrap.sh local >"$dir/install.log" 2>&1
installed=$(date +%s.%N)
.venv/bin/conductor ask --json >"$dir/run.json" 2>"$dir/ask.err"
done_at=$(date +%s.%N)
.venv/bin/python - "$dir/run.json" "$start" "$installed" "$done_at" "$dir/ask.err" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
start, installed, done = map(float, sys.argv[2:5])
tools = [s for s in run["steps"] if s.get("worker_name") == "python"]
print(f"install {installed - start:.1f} s, ask {done - installed:.1f} s, total {done - start:.1f} s")
print(f"status {run['status']}; final answer: {run['final_answer'][:120]!r}")
print("python tool:", [{"status": s["status"], "sandboxed": s.get("detail", {}).get("sandboxed")} for s in tools] or "not in the plan")
warnings = open(sys.argv[5]).read().strip()
print("warnings:", warnings[:300] or "none")
PY
