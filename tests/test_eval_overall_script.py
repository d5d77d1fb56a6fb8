"""benchmarks/eval_overall.py on the committed offline-pool results: several results files read as one,
only questions every policy answered, and paired differences against a named policy."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "evaluation" / "local-tools-1124" / "results.jsonl"


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_overall.py"), *map(str, args)], capture_output=True, text=True, env=env)


def test_two_results_files_are_compared_on_the_questions_both_answered(tmp_path):
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    qwen = [r for r in rows if r["policy"] == "single:qwen-coder"]
    code = [r for r in rows if r["policy"] == "fixed:code-then-run"][:-10]  # a later eval that stopped 10 short
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qwen))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in code))
    done = _run(tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--against", "single:qwen-coder")
    assert done.returncode == 0, done.stderr
    assert "140 question(s) answered by all 2 policies; 10 left out" in done.stdout
    kept = {(r["task"], r["question_id"]) for r in code}
    diff = (sum(r["correct"] for r in code) - sum(r["correct"] for r in qwen if (r["task"], r["question_id"]) in kept)) / 140
    assert f"| fixed:code-then-run | {100 * diff:+.1f} [" in done.stdout
    bad = _run(tmp_path / "a.jsonl", "--against", "nobody")
    assert bad.returncode != 0 and "no such policy" in bad.stderr
