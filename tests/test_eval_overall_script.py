"""benchmarks/eval_overall.py on results files written here: several results files read as one, only
questions every policy answered, and paired differences against a named policy."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("basic_arithmetic", "gsm_symbolic", "letter_counting", "simple_equations", "syllogism")


def _record(policy: str, task: str, index: int, correct: bool) -> dict:
    """One line of a `conductor eval` results.jsonl, as the evaluator writes it."""
    return {
        "task": task, "policy": policy, "question_id": f"4242-{index}", "repeat": 0, "question": f"{task} question {index}",
        "domain": "reasoning", "run_id": f"{policy}-{task}-{index}", "seed": index, "status": "ok",
        "final_answer": "Final answer: 1", "correct": correct, "score": float(correct), "extracted": "1",
        "reason": "test row", "steps": 1, "calls": 1, "tokens": 100, "worker_tokens": 100, "conductor_tokens": 0,
        "cost_usd": 0.0, "wall_s": 1.0, "workers_used": [policy.split(":")[-1]], "plan_fallback": None, "error": None,
        "finished_at": 1795552957.0 + index,
    }


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_overall.py"), *map(str, args)], capture_output=True, text=True, env=env)


def test_two_results_files_are_compared_on_the_questions_both_answered(tmp_path):
    rng = random.Random(0)
    questions = [(task, i) for task in TASKS for i in range(30)]  # 150 questions, 30 per kind
    qwen = [_record("single:qwen-coder", t, i, rng.random() < 0.1) for t, i in questions]
    code = [_record("fixed:code-then-run", t, i, rng.random() < 0.4) for t, i in questions][:-10]  # a later eval that stopped 10 short
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qwen))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in code))
    done = _run(tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--against", "single:qwen-coder")
    assert done.returncode == 0, done.stderr
    assert "140 question(s) answered by all 2 policies; 10 left out" in done.stdout
    kept = {(r["task"], r["question_id"]) for r in code}
    diff = (sum(r["correct"] for r in code) - sum(r["correct"] for r in qwen if (r["task"], r["question_id"]) in kept)) / 140
    assert diff != 0  # the check below must tell a wrong difference from the right one
    assert f"| fixed:code-then-run | {100 * diff:+.1f} [" in done.stdout
    bad = _run(tmp_path / "a.jsonl", "--against", "nobody")
    assert bad.returncode != 0 and "no such policy" in bad.stderr
