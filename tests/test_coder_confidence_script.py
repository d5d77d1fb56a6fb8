"""benchmarks/coder_confidence.py: the teacher-forced statistics line up with the program's tokens, the AUC and the
rule are what they say, and the script chooses its rule on the training records only and scores it on the held-out ones."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train_helpers import TINY_LLAMA, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "coder_confidence.py"
spec = importlib.util.spec_from_file_location("coder_confidence", SCRIPT)
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)


def test_the_statistics_score_the_programs_own_tokens(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer(tmp_path / "tok"))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in TINY_LLAMA.items() if k != "model_type"})).eval()
    messages = [{"role": "user", "content": "the task"}]
    output = "one agent check the answer"
    stats = cc.program_stats(model, tokenizer, messages, output)
    # the same log-probabilities one token at a time: the prompt, then each prefix of the program
    prompt = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    program = tokenizer(output, add_special_tokens=False)["input_ids"]
    stepwise, entropies = [], []
    for j, token in enumerate(program):
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + program[:j]])).logits[0, -1], -1)
        stepwise.append(logp[token].item())
        entropies.append(-(logp.exp() * logp).sum().item())
    assert stats["tokens"] == len(program) == 5
    assert stats["mean_lp"] == pytest.approx(sum(stepwise) / len(stepwise), abs=1e-5)
    assert stats["min_lp"] == pytest.approx(min(stepwise), abs=1e-5)
    assert stats["mean_ent"] == pytest.approx(sum(entropies) / len(entropies), abs=1e-5)
    with pytest.raises(ValueError, match="empty program"):
        cc.program_stats(model, tokenizer, messages, "")


def test_auc_counts_pairs_and_ties_and_needs_both_classes():
    assert cc.auc([1, 1, 0, 0], [0.9, 0.8, 0.1, 0.2]) == 1.0
    assert cc.auc([1, 0], [0.5, 0.5]) == 0.5
    assert cc.auc([1, 0, 0], [0.1, 0.5, 0.0]) == 0.5
    assert cc.auc([1, 1], [0.1, 0.2]) is None


def _row(lp, right, task="k", ent=None):
    return {"mean_lp": lp, "min_lp": lp, "mean_ent": -lp if ent is None else ent, "correct": right, "task": task}


def test_the_rule_switches_where_the_larger_coder_is_surer():
    # the larger coder is right exactly where it is surer than usual and the smaller one is not
    train = [(_row(-1.0, True), _row(-2.0, False)), (_row(-2.0, False), _row(-1.0, True)),
             (_row(-1.5, False), _row(-1.2, True)), (_row(-1.2, True), _row(-1.5, False))]
    picks = cc.rule_picks(train, "mean_lp", 0.0, train)
    assert picks == [1, 1, 1, 1]
    assert cc.rule_picks(train, "mean_lp", 10.0, train) == [1, 0, 0, 1]  # never switches: the smaller coder's answers
    # entropy is oriented: more entropy is less sure, so the same picks
    assert cc.rule_picks(train, "mean_ent", 0.0, train) == [1, 1, 1, 1]
    # where only the entropy tells the right coder, the fit chooses it
    only_entropy = [(_row(-1.0, right=not big, ent=1.0 if big else 0.0), _row(-1.0, right=big, ent=0.0 if big else 1.0))
                    for big in (True, False, True, False)]
    assert cc.fit_rule(only_entropy)[0] == "mean_ent"
    assert sum(cc.rule_picks(only_entropy, *cc.fit_rule(only_entropy), only_entropy)) == 4


def test_the_coders_first_step_is_its_program_and_a_failed_one_gives_none():
    from openconductor.records import Run, StepRecord

    def run(status):
        steps = [StepRecord(index=0, worker=0, worker_name="coder", subtask="write", access=[], messages=[{"role": "user", "content": "q"}],
                            output="print(6)", status=status),
                 StepRecord(index=1, worker=1, worker_name="python", subtask="run", access="all", output="6", status="ok"),
                 StepRecord(index=2, worker=0, worker_name="coder", subtask="answer", access="all", output="Final answer: 6", status="ok")]
        return Run(question="q", policy="fixed:code-run-answer", steps=steps)
    assert cc.coder_step(run("ok"), "coder") == ([{"role": "user", "content": "q"}], "print(6)")
    assert cc.coder_step(run("error"), "coder") is None  # not the answer step after it
    with pytest.raises(SystemExit, match="no step of worker 'other'"):
        cc.coder_step(run("ok"), "other")


def _record(qid, policy, right, task="lcm"):
    return {"task": task, "policy": policy, "question_id": qid, "repeat": 0, "question": "q", "run_id": f"{task}{qid}{policy}", "seed": 0,
            "status": "ok", "final_answer": "Final answer: 6", "correct": right, "score": float(right), "extracted": "6",
            "steps": 2, "calls": 2, "tokens": 100, "worker_tokens": 100, "conductor_tokens": 0, "cost_usd": 0.0, "wall_s": 1.0}


def test_the_script_chooses_on_training_records_and_scores_the_held_out_ones(tmp_path):
    pool = tmp_path / "pool.toml"
    pool.write_text('name = "two"\n[[workers]]\nname = "small"\nprovider = "local_gguf"\nmodel = "qwen2.5-coder-0.5b-instruct"\n'
                    '[[workers]]\nname = "large"\nprovider = "local_gguf"\nmodel = "qwen2.5-coder-1.5b-instruct"\n')
    scores, records = {}, {"train": [], "test": []}
    # training: the coder whose program is likelier is right. Held out, the other way round: a rule chosen on the
    # training records scores 0 % there, one fitted on the held-out answers would score 100 %.
    models = {"fixed:s": "qwen2.5-coder-0.5b-instruct", "fixed:l": "qwen2.5-coder-1.5b-instruct"}
    for split, n in (("train", 8), ("test", 4)):
        for q in range(n):
            large_right = q % 2 == 0
            for policy, right, sure in (("fixed:s", not large_right, not large_right), ("fixed:l", large_right, large_right)):
                if split == "test":
                    right = not right
                lp = -1.0 if sure else -2.0
                rec = _record(f"{split}{q}", policy, right, task=f"kind{q % 3}")
                records[split].append(rec)
                scores[f"{models[policy]}:{rec['run_id']}"] = {"mean_lp": lp, "min_lp": lp, "mean_ent": -lp, "tokens": 10}
    for split in records:
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[split]))
    (tmp_path / "scores.json").write_text(json.dumps(scores))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    base = [sys.executable, str(SCRIPT), "--pool", str(pool), "--train", str(tmp_path / "train.jsonl"), "--test", str(tmp_path / "test.jsonl"),
            "--scores", str(tmp_path / "scores.json"), "--traces", str(tmp_path / "t.db")]
    done = subprocess.run(base + ["--arm", "small=fixed:s", "--arm", "large=fixed:l"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in done.stdout.splitlines()
            if line.startswith("| train |") or line.startswith("| test |")}
    assert rows["train"][:5] == ["8", "100.0 %", "4", "50.0 %", "50.0 %"]  # questions, rule, switched, smaller, larger
    assert rows["test"][:5] == ["4", "0.0 %", "2", "50.0 %", "50.0 %"]
    assert rows["test"][7] == "100.0 %"  # either right
    assert "--train: 8 questions with a program from both coders; 0 left out" in done.stdout
    wrong = subprocess.run(base + ["--arm", "nobody=fixed:s", "--arm", "large=fixed:l"], capture_output=True, text=True, env=env)
    assert wrong.returncode == 2 and "worker 'nobody' is not in" in wrong.stderr
    twice = subprocess.run(base + ["--arm", "large=fixed:s", "--arm", "large=fixed:l"], capture_output=True, text=True, env=env)
    assert twice.returncode == 2 and "two different workers" in twice.stderr
    arms = ["--arm", "small=fixed:s", "--arm", "large=fixed:l"]
    shared = subprocess.run(base[:7] + [str(tmp_path / "train.jsonl")] + base[8:] + arms, capture_output=True, text=True, env=env)
    assert shared.returncode == 2 and "share 8 questions" in shared.stderr
    # a record not scored yet whose run is not in the trace store: a clear error, before any model loads
    (tmp_path / "scores.json").write_text(json.dumps({k: v for k, v in scores.items() if not k.endswith(records["test"][0]["run_id"])}))
    unknown = subprocess.run(base + arms, capture_output=True, text=True, env=env)
    assert unknown.returncode == 1 and "no trace with id" in unknown.stderr and "--traces" in unknown.stderr
    (tmp_path / "scores.json").write_text('{"cut off')
    corrupt = subprocess.run(base + arms, capture_output=True, text=True, env=env)
    assert corrupt.returncode == 2 and "is not JSON" in corrupt.stderr and "move it away" in corrupt.stderr
