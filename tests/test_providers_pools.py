"""Every example pool file loads, and its remote workers build their providers (no network, no keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openconductor.pool import PoolConfigError, load_pool
from openconductor.providers.base import make_provider

POOLS = sorted((Path(__file__).resolve().parents[1] / "examples" / "pools").glob("*.toml"))
KINDS = {"openai", "anthropic", "gemini", "simulated", "conductor"}  # local kinds load weights: not built here


def test_there_is_an_example_per_kind():
    names = {p.stem for p in POOLS}
    assert {"openai", "anthropic", "gemini", "vllm", "ollama", "llamacpp-server", "openrouter", "together", "local-gguf", "mixed"} <= names


@pytest.mark.parametrize("path", POOLS, ids=[p.stem for p in POOLS])
def test_example_pool_loads(path):
    spec = load_pool(path)
    assert spec.workers
    assert 0 <= spec.strongest_index() < len(spec.workers)
    backends = list(spec.workers) + ([spec.conductor.backend] if spec.conductor.backend else [])
    assert spec.conductor.worker or spec.conductor.backend, f"{path.name} declares no conductor backend"
    for worker in backends:
        if worker.provider in KINDS:
            provider = make_provider(worker)
            assert provider.spec is worker


def test_llamacpp_server_conductor_asks_for_a_grammar():
    spec = load_pool(next(p for p in POOLS if p.stem == "llamacpp-server"))
    assert make_provider(spec.conductor.backend).supports_grammar


def test_unknown_field_in_a_pool_is_a_typed_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[workers]]\nname = "a"\nprovider = "anthropic"\nmodel = "m"\napi_key = "sk-inline"\n')
    with pytest.raises(PoolConfigError, match=r"workers\.0\.api_key"):
        load_pool(path)
