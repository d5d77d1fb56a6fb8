"""Export a trained conductor to GGUF, so llama.cpp runs it: fast planning on a CPU, with the runtime grammar.

A conductor trained from a packaged GGUF (``model.name = "gguf:<package>"``) differs from it only where
training changed weights (with LoRA on a few layers: those layers' projections). The export copies the
original file — metadata, tokenizer, chat template and every unchanged tensor, still quantized — and
writes each changed tensor from the trained model (merged adapter) in ``dtype`` (f16 by default). Only
Llama-architecture files are supported (SmolLM2 is one); their q/k projections are stored permuted for
llama.cpp's rotary layout, which is applied here as llama.cpp's own converter does.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

_HF_NAME = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.weight$")


class GGUFExportError(ValueError):
    """A model that cannot be written into its GGUF (another architecture, shapes that do not match)."""


def _permute(weights, n_head: int, n_head_kv: int):
    """llama.cpp's q/k layout (its converter's ``permute``)."""
    if n_head_kv != n_head:
        n_head = n_head_kv
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _hf_name(gguf_name: str) -> str | None:
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    match = _BLOCK.match(gguf_name)
    if match and match.group(2) in _HF_NAME:
        return f"model.layers.{match.group(1)}.{_HF_NAME[match.group(2)]}.weight"
    return None


def export_gguf(model, base_model, source_gguf: Path, target: Path, *, dtype: str = "f16") -> dict:
    """Write ``target``: ``source_gguf`` with every tensor where ``model`` differs from ``base_model``
    (both transformers models of the same Llama architecture) replaced. Returns what was replaced."""
    import gguf
    import numpy as np
    import torch

    reader = gguf.GGUFReader(str(source_gguf))
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise GGUFExportError(f"{source_gguf.name}: architecture {arch!r}; the export supports llama-architecture files (e.g. SmolLM2)")
    cfg = model.config
    trained = {k: v.detach().float() for k, v in model.state_dict().items()}
    base = {k: v.detach().float() for k, v in base_model.state_dict().items()}
    writer = gguf.GGUFWriter(str(target), arch=arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # written by the writer itself
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub)
    replaced = []
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        if name is not None and name in trained and name in base and not torch.equal(trained[name], base[name]):
            weights = trained[name].numpy()
            if ".attn_q." in tensor.name:
                weights = _permute(weights, cfg.num_attention_heads, cfg.num_attention_heads)
            elif ".attn_k." in tensor.name:
                weights = _permute(weights, cfg.num_attention_heads, cfg.num_key_value_heads)
            if tuple(reversed(weights.shape)) != tuple(int(x) for x in tensor.shape):
                raise GGUFExportError(f"{tensor.name}: trained shape {weights.shape} does not fit the file's {list(tensor.shape)}")
            writer.add_tensor(tensor.name, weights.astype(np.float16 if dtype == "f16" else np.float32))
            replaced.append(tensor.name)
        else:
            writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    log.info("wrote %s: %d tensors from the trained model, %d copied", target, len(replaced), len(reader.tensors) - len(replaced))
    return {"replaced": replaced, "copied": len(reader.tensors) - len(replaced)}
