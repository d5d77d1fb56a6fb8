"""A few real GRPO steps (TRL GRPOTrainer) on a tiny random Llama against the SIMULATED pool.

The model and its tokenizer are built inside the test (no download); see train_helpers for why the
tiny tokenizer makes a random model write parseable workflows from the first step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
sys.path.insert(0, str(Path(__file__).parent))

from train_helpers import TINY_LLAMA, WORDS, tiny_tokenizer  # noqa: E402

from openconductor.workflow import parse  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def tiny_config(tmp_path: Path, **extra) -> Path:
    tok = tiny_tokenizer(tmp_path / "tok", **({"words": extra["words"]} if "words" in extra else {}))
    # TOML inline table from the dict (keys are bare words, values numbers/bools/strings).
    tiny = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in TINY_LLAMA.items()) + " }"
    text = f"""
pool = "{extra.get('pool', ROOT / 'examples' / 'pools' / 'simulated_paper.toml')}"
[model]
name = "{tok}"
tiny = {tiny}
[prompt]
max_steps = 2
examples = false
fine_grained = false
show = "names"
[data]
n_train = 16
n_eval = 4
{extra.get('data', '')}
[randomize]
enabled = {str(extra.get('randomize', False)).lower()}
k_min = 3
k_max = 5
[recursion]
fraction = {extra.get('fraction', 0.0)}
blend_fraction = {extra.get('blend_fraction', 0.0)}
[warmup_sft]
examples = 8
epochs = 1
learning_rate = 1e-3
batch_size = 4
[grpo]
num_generations = 4
per_device_train_batch_size = 8
gradient_accumulation_steps = 1
learning_rate = 5e-3
max_completion_length = 16
max_steps = {extra.get('max_steps', 4)}
seed = 1
[run]
output_dir = "{tmp_path / 'run'}"
save_steps = 2
report_to = []
"""
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    return path


def test_grpo_steps_change_parameters_and_write_metrics(tmp_path):
    import torch

    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import build_trainer, export

    cfg = load_train_config(tiny_config(tmp_path, randomize=True, fraction=0.25, blend_fraction=0.25))
    trainer, reward = build_trainer(cfg)
    assert (cfg.output_dir / "warmup" / "openconductor.json").exists()
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "GRPO left every parameter unchanged"
    rows = [json.loads(line) for line in (cfg.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for key in ("reward", "reward_std", "format_error_rate", "topology_diversity", "accuracy"):
        assert key in rows[0], key
    assert any(r["format_error_rate"] < 1.0 for r in rows), "the tiny model never wrote a parseable workflow"
    assert (cfg.output_dir / "metrics.csv").read_text().startswith("step,elapsed_s")
    assert (cfg.output_dir / "checkpoint-2").is_dir()
    assert reward.calls == 4
    final = export(trainer.model, trainer.processing_class, cfg.output_dir / "final", cfg)
    manifest = json.loads((final / "openconductor.json").read_text())
    assert manifest["kind"] == "full" and manifest["prompt"]["max_steps"] == 2
    from openconductor.pool import load_pool

    pool = load_pool(cfg.pool_path)  # the pool it learned, by name and workers in the order it saw them
    assert manifest["pool"] == {"name": pool.name, "workers": [w.name for w in pool.workers], "path": str(cfg.pool_path)}


def test_grpo_on_registered_tasks_grades_each_row_with_its_task_grader(tmp_path):
    """data.kind = "tasks": rows from reasoning-gym generators, graded by the generator's own scorer inside
    the reward (real grader); the six workers are simulated and always answer 3 (labelled as such)."""
    from openconductor.providers.simulated import RESPONDERS, register_responder
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import build_trainer

    workers = "".join(f'[[workers]]\nname = "w{i}"\nprovider = "simulated"\noptions = {{ world = "answers-three" }}\n' for i in range(6))
    (tmp_path / "pool.toml").write_text(f'name = "threes"\n{workers}')
    register_responder("answers-three")(lambda spec, messages, rng: "Final answer: 3")
    try:
        cfg = load_train_config(tiny_config(tmp_path, pool=tmp_path / "pool.toml", max_steps=2,
                                            data='kind = "tasks"\ntasks = ["basic_arithmetic", "rg:letter_counting"]'))
        trainer, reward = build_trainer(cfg)
        trainer.train()
    finally:
        RESPONDERS.pop("answers-three", None)
    rows = [json.loads(line) for line in (cfg.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    per_task = {k.split("/")[0] for r in rows for k in r if k.endswith("/accuracy")}
    assert per_task and per_task <= {"basic_arithmetic", "letter_counting"}
    graded = [s for s in reward.last_samples if s.parsed and not s.error]
    assert graded, "no workflow of the tiny model ran"
    # reasoning-gym's scorer decided each one: "3" is right only where the reference answer is 3.
    assert all(s.final_answer == "Final answer: 3" and s.reward == (1.0 if s.correct else 0.5) for s in graded)
    assert any(not s.correct for s in graded)  # a constant answer is graded wrong on most questions


def test_resume_continues_from_the_latest_checkpoint(tmp_path):
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import train

    path = tiny_config(tmp_path, max_steps=2)
    replay = {"reward.replay": "replay.sqlite3"}  # relative: next to the config file
    final = train(load_train_config(path, replay))
    assert (final / "model.safetensors").exists()
    stored = json.loads((final / "openconductor.json").read_text())["replay"]
    assert stored["match"] == "context" and stored["entries"] == stored["misses"] and (tmp_path / "replay.sqlite3").exists()
    cfg = load_train_config(path, {"grpo.max_steps": 3, **replay})
    train(cfg, resume=True)
    rows = [json.loads(line) for line in (cfg.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # steps 1-2 from the first run, 3 after resuming
    assert all("replay/hit_rate" in r and "replay/new_calls" in r for r in rows)


def test_a_stop_file_ends_the_run_after_the_current_step_with_a_checkpoint(tmp_path):
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import STOP_FILE, build_trainer

    cfg = load_train_config(tiny_config(tmp_path, max_steps=4))
    cfg.output_dir.mkdir(parents=True)
    (cfg.output_dir / STOP_FILE).touch()  # left over from an earlier run in this dir: not this run's
    trainer, _ = build_trainer(cfg)
    assert not (cfg.output_dir / STOP_FILE).exists()
    (cfg.output_dir / STOP_FILE).touch()  # asked while the run goes on
    trainer.train()
    rows = [json.loads(line) for line in (cfg.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1]
    assert (cfg.output_dir / "checkpoint-1").is_dir()  # save_steps is 2: this one was the stop's


def test_plot_writes_png(tmp_path, monkeypatch):
    from openconductor.train.plot import PlotError, plot_run

    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(PlotError, match="no metrics.jsonl"):
        plot_run(run)
    rows = [{"step": i, "reward": 0.1 * i, "format_error_rate": 1 - 0.1 * i, "worker_share/a": 0.5} for i in range(1, 6)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    png = plot_run(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # The per-domain panels, code's first- and final-step workers among them, on steps that saw code.
    rows = [dict(r, **{"lcb/steps_per_workflow": 2.0, "lcb/accuracy": 0.5, "lcb/first_worker/a": 1.0, "lcb/final_worker/b": 1.0})
            for r in rows]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    from matplotlib.figure import Figure

    titles: list[str] = []
    save = Figure.savefig

    def record(fig, *args, **kwargs):
        titles.extend(ax.get_title() for ax in fig.axes if ax.axison)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    plot_run(run, run / "domains.png")
    assert {"lcb: first-step worker share (moving avg 10)", "lcb: final-step worker share (moving avg 10)"} <= set(titles)


def test_plot_legend_names_the_largest_shares_when_a_run_logs_many_workers(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from openconductor.train.plot import LEGEND_MAX, legend_keys, plot_run

    # A run over generated pools logs a share for every worker it met, each in a few steps only.
    rows = [{"step": i, "reward": 0.5, **{f"worker_share/w{j:02d}": (j + 1) / 100 for j in range(i % 7, 40, 3)}}
            for i in range(1, 13)]
    keys = sorted({k for r in rows for k in r if k.startswith("worker_share/")})
    top = legend_keys(keys, rows, default=0.0)
    assert len(top) == LEGEND_MAX and top[0] == "worker_share/w39" and "worker_share/w00" not in top
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    legends: dict[str, list[str]] = {}
    save = Figure.savefig

    def record(fig, *args, **kwargs):
        for ax in fig.axes:
            if ax.get_legend() is not None:
                legends[ax.get_title()] = [t.get_text() for t in ax.get_legend().get_texts()]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    plot_run(run)
    (title, names), = [(t, n) for t, n in legends.items() if t.startswith("worker share")]
    assert f"top {LEGEND_MAX} of {len(keys)}" in title
    assert names == [k.split("/", 1)[1] for k in sorted(top)]  # lines are drawn in key order; only the top named


def test_paper_config_builds_grpo_arguments_without_gpu():
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import grpo_args

    cfg = load_train_config(ROOT / "examples" / "train_paper_qwen7b.toml")
    args = grpo_args(cfg)
    assert args.num_generations == 64 and args.per_device_train_batch_size * args.gradient_accumulation_steps == 256
    assert args.beta == 0.0 and args.learning_rate == 1e-6 and args.lr_scheduler_type == "cosine"
    assert args.use_vllm and args.vllm_mode == "server" and args.max_completion_length == 1024
    assert args.max_steps == 200 and args.temperature == 1.0 and args.bf16
    import yaml

    accel = yaml.safe_load((ROOT / "examples" / "accelerate" / "zero3.yaml").read_text())
    assert accel["distributed_type"] == "DEEPSPEED" and accel["deepspeed_config"]["zero_stage"] == 3


def test_metrics_of_an_earlier_run_in_the_same_dir_are_not_mixed_into_the_curves(tmp_path):
    """A fresh run drops every earlier row of metrics.jsonl; a resumed one keeps those up to its checkpoint."""
    from types import SimpleNamespace

    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import _callbacks

    cfg = load_train_config(tiny_config(tmp_path))
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.output_dir / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "reward": 0.1}) + "\n" for s in (1, 2, 3)))
    writer = _callbacks(cfg)[0]
    steps = lambda: [json.loads(line)["step"] for line in path.read_text().splitlines()]  # noqa: E731
    main = dict(is_world_process_zero=True)
    writer.on_train_begin(None, SimpleNamespace(global_step=2, is_world_process_zero=False), None)  # another process: the main one writes
    assert steps() == [1, 2, 3]
    writer.on_train_begin(None, SimpleNamespace(global_step=2, **main), None)  # resumed from checkpoint-2
    assert steps() == [1, 2]
    writer.on_train_begin(None, SimpleNamespace(global_step=0, **main), None)  # a fresh start
    assert steps() == []
    writer.on_log(None, SimpleNamespace(global_step=1, **main), None, logs={"reward": 0.5})
    writer.on_log(None, SimpleNamespace(global_step=1, is_world_process_zero=False), None, logs={"reward": 0.5})
    assert steps() == [1] and (cfg.output_dir / "metrics.csv").read_text().splitlines()[1].startswith("1,")


def test_warmup_only_stops_before_grpo_and_a_later_run_starts_from_that_warmup(tmp_path):
    from openconductor.train.config import TrainConfigError, load_train_config
    from openconductor.train.trainer import train

    path = tiny_config(tmp_path, max_steps=1)
    out = train(load_train_config(path), warmup_only=True)
    run = tmp_path / "run"
    assert out == run / "warmup" and (out / "openconductor.json").exists()
    taught = [json.loads(line) for line in (run / "warmup_targets.jsonl").read_text().splitlines()]
    cfg = load_train_config(path)
    assert len(taught) == cfg.warmup_sft.examples and all(parse(t["target"]).steps and t["question"] and "domain" in t and t["bare"] is False for t in taught)
    assert not (run / "final").exists() and not list(run.glob("checkpoint-*")) and not (run / "metrics.jsonl").exists()
    from openconductor.train.plot import plot_run

    png = plot_run(run)  # no GRPO steps yet: the warm-up's own plot
    assert png == run / "curves.png" and png.read_bytes()[:4] == b"\x89PNG"
    png.unlink()
    made = (out / "openconductor.json").stat().st_mtime_ns
    final = train(load_train_config(path))  # GRPO in the same dir: the warm-up is loaded, not redone
    assert (final / "openconductor.json").exists()
    assert (out / "openconductor.json").stat().st_mtime_ns == made
    with pytest.raises(TrainConfigError, match="needs a warm-up"):
        train(load_train_config(path, {"warmup_sft.examples": 0}), warmup_only=True)


def test_grpo_held_to_the_warmups_wordings_writes_only_them_and_records_them(tmp_path):
    """rollout.subtasks = "trained": every rollout's subtasks are the warm-up's recorded wordings (here the one the tiny
    tokenizer's grammar-form plans use), and the final manifest records them, so the runtime holds the model to them too."""
    from openconductor.conductor.manifest import read_manifest
    from openconductor.train.config import TrainConfigError, load_train_config
    from openconductor.train.trainer import build_trainer, prepare, train

    # Without the word "Reasoning:", every token a constrained rollout can start with is a whole plan.
    path = tiny_config(tmp_path, max_steps=2, words=[w for w in WORDS if w != "Reasoning:"])
    closed = {"rollout.constrained": True, "rollout.subtasks": "trained"}
    with pytest.raises(TrainConfigError, match="rollout.subtasks = 'trained' needs rollout.constrained = true"):
        load_train_config(path, {"rollout.subtasks": "trained"})
    cfg = load_train_config(path, closed)
    prepare(cfg)  # the warm-up records what it taught: the format warm-up's phrases
    warm = cfg.output_dir / "warmup"
    taught = read_manifest(warm).wordings
    assert taught and all(isinstance(w, str) for w in taught)
    manifest = read_manifest(warm)
    manifest.wordings = ["Solve the task."]  # the only subtask the tiny tokenizer's grammar-form plans carry
    manifest.write(warm)
    trainer, _ = build_trainer(load_train_config(path, closed))
    assert {fmt.wordings for fmt in trainer.rollout_func.formats.values()} == {("Solve the task.",)}
    final = train(load_train_config(path, closed))
    assert read_manifest(final).wordings == ["Solve the task."]
    rows = [json.loads(line) for line in (cfg.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["format_error_rate"] == 0.0 for r in rows)
    # Without a recorded set (a warm-up made before the trainer recorded one) GRPO is refused, with the way out.
    manifest.wordings = None
    manifest.write(warm)
    with pytest.raises(TrainConfigError, match="records none: run the warm-up in this output dir"):
        train(load_train_config(path, {**closed, "run.output_dir": str(cfg.output_dir)}))
