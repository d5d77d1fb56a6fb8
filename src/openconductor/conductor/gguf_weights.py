"""A Llama-architecture GGUF file with some of its weights replaced: what lets a trained conductor run on llama.cpp.

A conductor trained from a packaged GGUF (``model.name = "gguf:<package>"``) differs from it only where
training changed weights (with LoRA on a few layers: those layers' projections). The copy keeps the
original file — metadata, tokenizer, chat template and every unchanged tensor, still quantized — and
writes each changed tensor in ``dtype`` (f16 by default). ``export_gguf`` takes the changed weights
(training's export, ``gguf_export.py``); ``merge_adapter_gguf`` takes a LoRA adapter dir and needs
numpy only (a conductor shipped as an adapter, built on first use by ``conductor/checkpoint.py``).
Only Llama-architecture files are supported (SmolLM2 is one); their q/k projections are stored permuted
for llama.cpp's rotary layout, which is applied here as llama.cpp's own converter does.
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


def export_gguf(changed: dict, config, source_gguf: Path, target: Path, *, dtype: str = "f16") -> dict:
    """Write ``target``: ``source_gguf`` with the tensors named in ``changed`` ({transformers name: weights}
    of a Llama model with this ``config``) replaced. Returns what was replaced."""
    reader = _llama_reader(source_gguf)
    heads = (config.num_attention_heads, config.num_key_value_heads)
    new = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        if name in changed:
            new[tensor.name] = _to_gguf_layout(tensor.name, changed[name].float().cpu().numpy(), *heads)
    missing = sorted(set(changed) - {_hf_name(t.name) for t in reader.tensors})
    if missing:
        raise GGUFExportError(f"{len(missing)} trained weight(s) have no place in {source_gguf.name}, e.g. {missing[0]}")
    return _write(reader, source_gguf, target, new, dtype)


def merge_adapter_gguf(adapter_dir: Path, source_gguf: Path, target: Path, *, dtype: str = "f16") -> dict:
    """Write ``target``: ``source_gguf`` with a LoRA adapter dir (peft's files) merged in, with numpy only
    (no torch): each adapted weight is the file's own (de-quantised) weight plus the adapter's delta.
    This is how a conductor that ships as a small adapter runs on llama.cpp with just the ``local`` extra."""
    import gguf

    deltas = adapter_deltas(adapter_dir)
    reader = _llama_reader(source_gguf)
    heads = (int(reader.fields["llama.attention.head_count"].contents()), int(reader.fields["llama.attention.head_count_kv"].contents()))
    new = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        if name in deltas:
            base = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            delta = _to_gguf_layout(tensor.name, deltas[name], *heads)
            if base.shape != delta.shape:
                raise GGUFExportError(f"{tensor.name}: adapter delta {delta.shape} does not fit the file's {base.shape}")
            new[tensor.name] = base + delta
    missing = sorted(set(deltas) - {_hf_name(t.name) for t in reader.tensors})
    if missing:
        raise GGUFExportError(f"{len(missing)} adapter weight(s) have no place in {source_gguf.name}, e.g. {missing[0]}")
    return _write(reader, source_gguf, target, new, dtype)


def adapter_deltas(adapter_dir: Path) -> dict:
    """{transformers weight name: scaling * B @ A} of a plain LoRA adapter dir (peft's
    ``adapter_config.json`` and ``adapter_model.safetensors``), as float32 numpy arrays."""
    import json

    import numpy as np
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    if cfg.get("peft_type", "LORA") != "LORA" or cfg.get("use_dora") or cfg.get("fan_in_fan_out") or cfg.get("rank_pattern") or cfg.get("alpha_pattern"):
        raise GGUFExportError(f"{adapter_dir}: only plain LoRA adapters merge without torch (no DoRA, fan_in_fan_out or per-module ranks)")
    r, alpha = int(cfg["r"]), float(cfg["lora_alpha"])
    scaling = alpha / (r ** 0.5) if cfg.get("use_rslora") else alpha / r
    try:
        tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    except (TypeError, ValueError) as exc:  # e.g. bfloat16, which numpy has no type for
        raise GGUFExportError(f"{adapter_dir}: cannot read the adapter with numpy: {exc}") from exc
    out = {}
    for key, a in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        module = key.removesuffix(".lora_A.weight")
        b = tensors.get(module + ".lora_B.weight")
        if b is None:
            raise GGUFExportError(f"{adapter_dir}: {key} has no lora_B")
        out[module.removeprefix("base_model.model.") + ".weight"] = (b.astype(np.float32) @ a.astype(np.float32)) * np.float32(scaling)
    if not out:
        raise GGUFExportError(f"{adapter_dir}: the adapter holds no LoRA weights")
    return out


def _llama_reader(source_gguf: Path):
    import gguf

    reader = gguf.GGUFReader(str(source_gguf))
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise GGUFExportError(f"{source_gguf.name}: architecture {arch!r}; the export supports llama-architecture files (e.g. SmolLM2)")
    return reader


def _to_gguf_layout(gguf_name: str, weights, n_head: int, n_head_kv: int):
    """A transformers-layout weight in llama.cpp's layout (q/k rows permuted for its rotary embedding)."""
    if ".attn_q." in gguf_name:
        return _permute(weights, n_head, n_head)
    if ".attn_k." in gguf_name:
        return _permute(weights, n_head, n_head_kv)
    return weights


def _write(reader, source_gguf: Path, target: Path, new: dict, dtype: str) -> dict:
    """Copy ``reader``'s file to ``target`` with the tensors in ``new`` ({gguf name: array}) written in ``dtype``."""
    import gguf
    import numpy as np

    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(target), arch=arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # written by the writer itself
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub)
    replaced = []
    for tensor in reader.tensors:
        if tensor.name in new:
            weights = new[tensor.name]
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
