"""benchmarks/coder_agreement.py on hand-made records: which coder's runs agree decides, the majority answer, the
fallback where nothing decides, and the oracle row."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "coder_agreement.py"


def _record(qid, policy, extracted, right):
    return {"task": "lcm", "policy": policy, "question_id": qid, "repeat": 0, "question": "q", "run_id": f"{qid}{policy}", "seed": 0,
            "status": "ok", "final_answer": f"Final answer: {extracted}", "correct": right, "score": float(right), "extracted": extracted,
            "steps": 2, "calls": 2, "tokens": 100, "worker_tokens": 100, "conductor_tokens": 0, "cost_usd": 0.0, "wall_s": 1.0}


def _run(tmp_path, *extra):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), *extra], capture_output=True, text=True, env=env)


def test_agreement_majority_fallback_and_oracle(tmp_path):
    # the answer is 6 everywhere. Per question: the small coder's two runs, then the large coder's two runs.
    #   q0: small agrees on 6, large disagrees           -> agreement: small (right); majority 6 (2 of 4) right
    #   q1: large agrees on 6, small disagrees           -> agreement: large (right); majority right
    #   q2: both agree, on different answers (7 and 6)    -> agreement falls back to large (right); majority tie -> fallback
    #   q3: neither agrees (5, 7 / 8, 6)                 -> fallback large, first run wrong; any right through large's 2nd run
    runs = {"q0": ("6", "6", "9", "8"), "q1": ("5", "4", "6", "6"), "q2": ("7", "7", "6", "6"), "q3": ("5", "7", "8", "6")}
    first, second = [], []
    for qid, (s1, s2, l1, l2) in runs.items():
        first += [_record(qid, "fixed:small", s1, s1 == "6"), _record(qid, "fixed:large", l1, l1 == "6")]
        second += [_record(qid, "fixed:small", s2, s2 == "6"), _record(qid, "fixed:large", l2, l2 == "6")]
    second.append(_record("q9", "fixed:small", "6", True))  # answered by one run only: left out
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    (tmp_path / "b" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in second))
    a, b = str(tmp_path / "a" / "results.jsonl"), str(tmp_path / "b" / "results.jsonl")
    done = _run(tmp_path, "--run", "small", a, "fixed:small", "--run", "small", b, "fixed:small",
                "--run", "large", a, "fixed:large", "--run", "large", b, "fixed:large", "--fallback", "large")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("4 questions of 1 kinds")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| ") and "%" in line}
    assert rows["agreement"] == "75.0 %"  # q0, q1, q2 right; q3 falls back to large's wrong first run
    assert rows["majority"] == "75.0 %"  # q0, q1 by majority; q2 tied (7 twice, 6 twice) -> large's right first run; q3 -> wrong
    assert rows["any right (oracle)"] == "100.0 %"
    assert rows["small: fixed:small (a)"] == "25.0 %" and rows["large: fixed:large (b)"] == "75.0 %"


def test_it_refuses_a_third_coder_an_unknown_fallback_and_missing_records(tmp_path):
    (tmp_path / "r.jsonl").write_text(json.dumps(_record("q0", "fixed:small", "6", True)) + "\n")
    r = str(tmp_path / "r.jsonl")
    three = _run(tmp_path, "--run", "a", r, "fixed:small", "--run", "b", r, "fixed:small", "--run", "c", r, "fixed:small", "--fallback", "a")
    assert three.returncode == 2 and "exactly two coders" in three.stderr
    unknown = _run(tmp_path, "--run", "a", r, "fixed:small", "--run", "b", r, "fixed:small", "--fallback", "z")
    assert unknown.returncode == 2 and "fallback 'z'" in unknown.stderr
    missing = _run(tmp_path, "--run", "a", r, "fixed:small", "--run", "b", r, "fixed:nothing", "--fallback", "a")
    assert missing.returncode == 2 and "no records of fixed:nothing" in missing.stderr
