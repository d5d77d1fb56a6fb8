"""benchmarks/eval_generalisation_table.py on hand-made results: held-out kinds and everyday questions as groups,
only questions every policy answered, the best single/fixed baselines and the per-kind lookup bound."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _record(task, qid, policy, correct, tokens=100):
    return {"task": task, "policy": policy, "question_id": qid, "repeat": 0, "question": "q", "run_id": f"{task}{qid}{policy}", "seed": 0,
            "status": "ok", "final_answer": "a", "correct": correct, "score": float(correct), "steps": 1, "calls": 1, "tokens": tokens,
            "worker_tokens": tokens, "conductor_tokens": 0, "cost_usd": 0.0, "wall_s": 1.0}


def test_groups_baselines_and_the_lookup_bound(tmp_path):
    # lcm: code right on both, qwen on none; coin_flip: qwen right on both, code on none; so the per-kind
    # lookup is right on all 4 while each fixed baseline gets 2 of 4. everyday-001 is answered by qwen alone.
    rows = []
    for qid in ("0", "1"):
        rows += [_record("lcm", qid, "single:qwen", False, 50), _record("lcm", qid, "fixed:code", True, 300), _record("lcm", qid, "conductor", True)]
        rows += [_record("coin_flip", qid, "single:qwen", True, 50), _record("coin_flip", qid, "fixed:code", False, 300),
                 _record("coin_flip", qid, "conductor", qid == "0")]
    # aiw: qwen right on one question, code on the other: a per-kind lookup gets 1 of 2, a per-question chooser 2.
    rows += [_record("aiw", "0", "single:qwen", True, 50), _record("aiw", "0", "fixed:code", False, 300), _record("aiw", "0", "conductor", False)]
    rows += [_record("aiw", "1", "single:qwen", False, 50), _record("aiw", "1", "fixed:code", True, 300), _record("aiw", "1", "conductor", False)]
    rows += [_record("everyday", "everyday-001", p, p == "single:qwen") for p in ("single:qwen", "fixed:code", "conductor")]
    rows.append(_record("lcm", "2", "single:qwen", True))  # answered by one policy only: left out
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_generalisation_table.py"), str(tmp_path / "r.jsonl"), "--against", "conductor"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "7 question(s) answered by all of" in out and "### held-out kinds: 6 questions" in out and "### everyday (test split): 1 questions" in out
    held = out.split("### held-out kinds")[1].split("###")[0]
    assert "| lookup (oracle) | 83.3 | — |" in held and "| any baseline (oracle) | 100.0 | — |" in held
    assert "| conductor | 50.0 | 100 |" in held and "| fixed:code | 50.0 | 300 |" in held
    # The lookup takes code on lcm and qwen on coin_flip (aiw: a tie, the first listed): +33.3 over the best fixed workflow.
    assert "vs best fixed (fixed:code)" in held
    lookup_line = next(line for line in held.splitlines() if line.startswith("| lookup"))
    assert "+33.3 [" in lookup_line


def _held_out_section(tmp_path, rows) -> str:
    """The script's held-out-kinds table for these records."""
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_generalisation_table.py"), str(tmp_path / "r.jsonl")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("### held-out kinds")[1].split("### everyday")[0]


def test_any_policy_bound_counts_what_only_a_conductor_got_right(tmp_path):
    # lcm 0: code right; lcm 1: only the conductor right; lcm 2: nobody.
    rows = [_record("lcm", "0", "single:qwen", False), _record("lcm", "0", "fixed:code", True), _record("lcm", "0", "trained:c", False),
            _record("lcm", "1", "single:qwen", False), _record("lcm", "1", "fixed:code", False), _record("lcm", "1", "trained:c", True),
            _record("lcm", "2", "single:qwen", False), _record("lcm", "2", "fixed:code", False), _record("lcm", "2", "trained:c", False)]
    held = _held_out_section(tmp_path, rows)
    assert "| any baseline (oracle) | 33.3 | — |" in held and "| any policy (oracle) | 66.7 | — |" in held
    assert "trained:c: right on 1 question(s) that no single worker or fixed workflow got right (lcm 1)" in held


def test_majority_answer_chooses_without_the_grader(tmp_path):
    # lcm 0: two policies say 6 (right), one says 7: the majority is right. lcm 1: two say 9 (wrong), the fixed
    # workflow alone says 8 (right): the majority is wrong, though an oracle would be right. lcm 2: a three-way tie
    # goes to the best fixed workflow's answer (right). lcm 3: nobody answers: wrong.
    def rec(qid, policy, answer, correct):
        return {**_record("lcm", qid, policy, correct), "extracted": answer}

    rows = [rec("0", "single:qwen", "6", True), rec("0", "fixed:code", "7", False), rec("0", "trained:c", " 6 ", True),
            rec("1", "single:qwen", "9", False), rec("1", "fixed:code", "8", True), rec("1", "trained:c", "9", False),
            rec("2", "single:qwen", "1", False), rec("2", "fixed:code", "2", True), rec("2", "trained:c", "3", False),
            rec("3", "single:qwen", None, False), rec("3", "fixed:code", None, False), rec("3", "trained:c", None, False)]
    held = _held_out_section(tmp_path, rows)
    assert "| majority answer (no grader) | 50.0 | — |" in held
    assert "| any policy (oracle) | 75.0 | — |" in held
