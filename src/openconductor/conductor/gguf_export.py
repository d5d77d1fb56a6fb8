"""Export a trained conductor to GGUF, so llama.cpp runs it: fast planning on a CPU, with the runtime grammar.

The weights training changed (merged LoRA, or a full model against its base) are written into the
base's own GGUF file by ``gguf_weights.export_gguf``; see there for what is copied and what is replaced.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .gguf_weights import GGUFExportError, export_gguf
from .checkpoint import CONDUCTOR_GGUF

log = logging.getLogger(__name__)


def changed_weights(model, base_model) -> dict:
    """{transformers name: tensor} of every weight where ``model`` differs from ``base_model``."""
    import torch

    base = base_model.state_dict()
    # On CPU: the trained model may sit on a GPU, the freshly loaded base never does.
    return {k: v.detach().cpu() for k, v in model.state_dict().items() if k in base and not torch.equal(v.detach().cpu(), base[k].cpu())}


def merged_lora_weights(peft_model) -> dict:
    """{transformers name: base weight + adapter delta} of every module a LoRA adapter changes, without
    modifying the model (cheap enough to run every training step)."""
    import torch

    out = {}
    with torch.no_grad():
        for name, module in peft_model.named_modules():
            if not hasattr(module, "lora_A") or not hasattr(module, "base_layer") or not module.lora_A:
                continue
            delta = sum(module.get_delta_weight(adapter) for adapter in module.active_adapters if adapter in module.lora_A)
            hf = name.removeprefix("base_model.model.") + ".weight"
            out[hf] = (module.base_layer.weight + delta).detach()
    return out


def export_trained(model, model_ref: str, target_dir: Path) -> Path | None:
    """Write ``target_dir/conductor.gguf`` for a model trained from ``model_ref`` (``gguf:<package or
    file>``): the base's file with every weight training changed. Returns the file, or None (logged) when
    it cannot be written — the transformers export beside it is still complete, so nothing is lost."""
    target = Path(target_dir) / CONDUCTOR_GGUF
    if target.exists():
        target.unlink()  # an older export's copy must not outlive this one
    if not model_ref.startswith("gguf:"):
        return None
    try:
        import gguf  # noqa: F401

        from ..model_files import gguf_source

        source, _ = gguf_source(model_ref)
        if hasattr(model, "peft_config"):
            changed = merged_lora_weights(model)
        else:
            from transformers import AutoModelForCausalLM

            from ..model_files import resolve_model

            changed = changed_weights(model, AutoModelForCausalLM.from_pretrained(resolve_model(model_ref)))
        export_gguf(changed, model.config, source, target)
        return target
    except (ImportError, GGUFExportError, OSError) as exc:
        log.warning("no %s in %s: %s", CONDUCTOR_GGUF, target_dir, exc)
        return None
    except Exception:  # an optional extra: it must never cost the run its (torch) export
        log.exception("no %s in %s: unexpected error while writing it", CONDUCTOR_GGUF, target_dir)
        return None
