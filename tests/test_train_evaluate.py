"""The held-out evaluation's statistics and the checkpoint rule the one-command CPU run applies
(scripts/train_cpu_smollm2.sh): pure functions, no model."""

from __future__ import annotations

import json

import pytest

from openconductor.evaluation import paired_bootstrap
from openconductor.train.evaluate import choose_checkpoint

TRAINED = "after GRPO (trained)"


def write_rows(directory, name, accuracy, steps=2.0):
    rows = [{"system": "best single worker (gemini-2.5-pro)", "accuracy": 0.99, "steps": 1.0},
            {"system": TRAINED, "accuracy": accuracy, "steps": steps}]
    (directory / f"{name}.json").write_text(json.dumps(rows))


def test_choose_checkpoint_takes_the_most_accurate_and_ties_go_to_the_later(tmp_path):
    # Written out of order, and checkpoint-100 sorts before checkpoint-40 as a string.
    for name, accuracy in [("final", 0.60), ("checkpoint-100", 0.65), ("checkpoint-40", 0.65), ("checkpoint-60", 0.50)]:
        write_rows(tmp_path, name, accuracy)
    name, scored = choose_checkpoint(tmp_path)
    assert name == "checkpoint-100"  # tie with checkpoint-40: the later one; the baseline row is ignored
    assert [s[0] for s in scored] == ["checkpoint-40", "checkpoint-60", "checkpoint-100", "final"]
    write_rows(tmp_path, "final", 0.65)
    assert choose_checkpoint(tmp_path)[0] == "final"  # final counts as the latest


def test_the_warmup_is_a_candidate_that_loses_ties_to_any_later_checkpoint(tmp_path):
    write_rows(tmp_path, "warmup", 0.65)
    write_rows(tmp_path, "checkpoint-40", 0.65)
    write_rows(tmp_path, "final", 0.60)
    name, scored = choose_checkpoint(tmp_path)
    assert name == "checkpoint-40" and scored[0][0] == "warmup"
    write_rows(tmp_path, "warmup", 0.70)
    assert choose_checkpoint(tmp_path)[0] == "warmup"  # GRPO made it worse: the warm-up is what gets tested


def test_choose_checkpoint_rejects_missing_or_foreign_rows(tmp_path):
    with pytest.raises(FileNotFoundError, match="no validation rows"):
        choose_checkpoint(tmp_path)
    (tmp_path / "checkpoint-40.json").write_text(json.dumps([{"system": "oracle single-step router", "accuracy": 1.0, "steps": 1.0}]))
    with pytest.raises(ValueError, match="no row for system"):
        choose_checkpoint(tmp_path)
    write_rows(tmp_path, "checkpoint-40", 0.5)
    write_rows(tmp_path, "notes", 0.9)
    with pytest.raises(ValueError, match="warmup.json, checkpoint-<step>.json or final.json"):
        choose_checkpoint(tmp_path)


def test_paired_bootstrap_interval_brackets_the_difference():
    a = [1] * 60 + [0] * 40
    b = [1] * 50 + [0] * 50  # a is right on 10 more questions: +0.10
    mean, low, high = paired_bootstrap(a, b, resamples=2_000)
    assert mean == pytest.approx(0.10) and 0.03 < low < 0.10 < high < 0.17
    same = paired_bootstrap(b, b, resamples=500)
    assert same == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="equally long"):
        paired_bootstrap([1], [1, 0])


def _record(i: int, workers: list[str], *, correct: bool = True, status: str = "ok"):
    from openconductor.evaluation import EvalRecord

    return EvalRecord(task="held-out", policy="chains", question_id=str(i), repeat=0, question=f"q{i}", domain="lcb", run_id="r",
                      seed=0, status=status, final_answer="x" if workers else "", correct=correct, score=float(correct),
                      extracted="x" if workers else None, steps=len(workers), calls=len(workers), tokens=10, worker_tokens=10,
                      conductor_tokens=0, cost_usd=0.0, wall_s=0.0, workers_used=workers, accesses=[[]] + ["all"] * (len(workers) - 1))


def test_summary_tells_who_writes_the_code_from_who_reviews_it():
    from openconductor.train.config import RewardSettings
    from openconductor.train.evaluate import comparison_table, summarise

    chain = ["gpt-5-minimal", "gemini-2.5-pro"]
    records = [_record(0, chain), _record(1, chain), _record(2, chain), _record(3, ["claude-sonnet-4"]),
               _record(4, [], correct=False, status="plan_failed")]
    row = summarise("chains", records, RewardSettings(), {"lcb": "gpt-5-minimal"})
    # Shares are over all the domain's questions: the unparsed plan has no first or final worker.
    assert row.first_worker_by_domain == {"lcb": {"gpt-5-minimal": 0.6, "claude-sonnet-4": 0.2}}
    assert row.final_worker_by_domain == {"lcb": {"gemini-2.5-pro": 0.6, "claude-sonnet-4": 0.2}}
    table = comparison_table([row], ["lcb"])
    assert "| gpt-5-minimal 0.60, claude-sonnet-4 0.20 | gemini-2.5-pro 0.60, claude-sonnet-4 0.20 |" in table
    assert len({line.count("|") for line in table.splitlines()}) == 1  # header, rule and rows: one width


def test_a_checkpoints_plans_are_scored_through_the_evaluator(tmp_path):
    """The conductor rows of the held-out table: a tiny random checkpoint (no download) writes its plans
    with the training format's constraint, and the evaluator runs them on the SIMULATED pool."""
    pytest.importorskip("transformers")
    from test_train_grpo import tiny_config
    from test_train_runtime import save_tiny

    from openconductor.train.config import load_train_config
    from openconductor.train.evaluate import evaluate_conductors

    checkpoint = save_tiny(tmp_path)
    overrides = {"rollout.constrained": True}  # the tokenizer holds whole plans as tokens: greedy and constrained, one parses
    cfg = load_train_config(tiny_config(tmp_path), overrides)
    rows = evaluate_conductors(cfg, {"tiny": str(checkpoint)}, moa=False)
    assert [r.system for r in rows][-1] == "tiny" and rows[0].system.startswith("best single worker")
    tiny = rows[-1]
    assert tiny.parse_rate == 1.0 and 1.0 <= tiny.steps <= 2.0 and len(tiny.correct) == cfg.data.n_eval
    assert tiny.tokens > 0 and 0.5 <= tiny.reward <= 1.0  # every plan parsed and ran: wrong answers earn 0.5


def test_the_evaluator_decodes_a_held_conductor_under_its_wordings_as_the_runtime_does(tmp_path, monkeypatch):
    """A checkpoint whose manifest records wordings is scored held to them, as `[conductor] subtasks = "trained"` plans
    at run time (the tiny model's grammar-form plans all say "Solve the task.", so its plans still parse)."""
    pytest.importorskip("transformers")
    from test_train_grpo import tiny_config
    from test_train_runtime import save_tiny

    from openconductor import decoding
    from openconductor.conductor.manifest import read_manifest
    from openconductor.pool import load_pool
    from openconductor.train.config import load_train_config
    from openconductor.train.data import load_items
    from openconductor.train.evaluate import conductor_texts

    checkpoint = save_tiny(tmp_path)
    manifest = read_manifest(checkpoint)
    manifest.wordings = ["Solve the task."]
    manifest.write(checkpoint)
    cfg = load_train_config(tiny_config(tmp_path), {"rollout.constrained": True})
    seen = []
    real = decoding.generate_batch

    def recording(*args, formats=None, **kwargs):
        seen.extend(formats or [])
        return real(*args, formats=formats, **kwargs)

    monkeypatch.setattr(decoding, "generate_batch", recording)
    spec = load_pool(cfg.pool_path)
    items = load_items(cfg, held_out=True)[:2]
    texts, _ = conductor_texts(str(checkpoint), items, spec, cfg, temperature=0.0, batch_size=2, seed=0)
    assert seen and all(f.wordings == ("Solve the task.",) for f in seen)
    assert all('"Solve the task."' in t for t in texts)
    free = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"subtasks": "free"})})
    seen.clear()
    conductor_texts(str(checkpoint), items, free, cfg, temperature=0.0, batch_size=2, seed=0)
    assert seen and all(f.wordings == () for f in seen)
