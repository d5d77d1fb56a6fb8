"""In-process transformers provider: a local checkpoint dir (full model or LoRA adapter) as a worker.

``WorkerSpec.model`` is the directory. An adapter dir (``adapter_config.json``) is loaded on top of
its base model with peft. A conductor exported by ``conductor train`` also carries
``openconductor.json`` (how its prompt was built); ``trained_conductor`` turns that into the pool
settings and policy options that make the runtime prompt it exactly as it was trained.
Options: ``TransformersOptions``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..pool import PoolConfigError, PoolSpec, Provider, ProviderError, TokenCallback, WorkerSpec
from ..records import Completion, Usage

MANIFEST = "openconductor.json"
CONDUCTOR_GGUF = "conductor.gguf"  # the llama.cpp copy `conductor train` writes beside the checkpoint


def load_checkpoint(path: str | Path, *, device: str = "cpu", dtype: str = "float32"):
    """(model, tokenizer) from a full checkpoint dir or a LoRA adapter dir."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser()
    if not path.is_dir():
        raise PoolConfigError(f"transformers worker: checkpoint dir not found: {path}")
    torch_dtype = getattr(torch, dtype)
    if (path / "adapter_config.json").exists():
        from peft import PeftModel

        base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
        manifest = read_manifest(path)
        base = manifest.get("base_model") or base
        if not base:
            raise PoolConfigError(f"{path}: adapter without a base model (adapter_config.json base_model_name_or_path)")
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
        model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()  # merged: no adapter cost per token
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()
    return model, tokenizer


def read_manifest(path: Path) -> dict:
    """A checkpoint's ``openconductor.json`` (what trained it, on which base, its llama.cpp copy); {} if none."""
    file = path / MANIFEST
    return json.loads(file.read_text()) if file.exists() else {}


def _llamacpp_backend(path: Path, manifest: dict) -> Optional[WorkerSpec]:
    """The checkpoint's llama.cpp copy (``conductor.gguf``, written by ``conductor train``) as a backend."""
    if "gguf" in manifest and not manifest["gguf"]:
        return None  # the last export wrote none: a conductor.gguf left there is an older model's
    file = path / (manifest.get("gguf") or CONDUCTOR_GGUF)
    if not file.is_file():
        return None
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        return None
    return WorkerSpec(name=f"conductor:{path.name}", provider="local_gguf", model=str(file), concurrency=1, timeout_s=600)


Engine = Literal["auto", "llama.cpp", "transformers"]
ENGINES: tuple[str, ...] = get_args(Engine)


def trained_conductor(spec: PoolSpec, path: str | Path, *, engine: Engine = "auto") -> tuple[PoolSpec, dict]:
    """A pool whose conductor backend is the checkpoint at ``path``, and the LMConductor options.

    The checkpoint's manifest (if any) says how its prompt was built (few-shot examples, access
    scheme, step cap, how the pool is shown) so the runtime prompts it the way it was trained.
    ``engine="auto"`` plans with the checkpoint's llama.cpp copy when it has one (grammar-constrained,
    several times faster on a CPU; its untouched layers stay quantized, so its plans can differ from
    the transformers model's in rare near-ties), else with transformers.
    """
    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise PoolConfigError(f"--conductor: checkpoint dir not found: {path}")
    manifest = read_manifest(path)
    prompt = manifest.get("prompt", {})
    backend = _llamacpp_backend(path, manifest) if engine in ("auto", "llama.cpp") else None
    if backend is None and engine == "llama.cpp":
        raise PoolConfigError(f"--conductor: {path} has no llama.cpp copy ({path / CONDUCTOR_GGUF}) or xllamacpp is not installed")
    if backend is None:
        backend = WorkerSpec(name=f"conductor:{path.name}", provider="transformers", model=str(path), concurrency=1, timeout_s=600)
    conductor = spec.conductor.model_copy(
        update={
            "worker": None,
            "backend": backend,
            "max_steps": int(prompt.get("max_steps", spec.conductor.max_steps)),
            "fine_grained_access": bool(prompt.get("fine_grained", spec.conductor.fine_grained_access)),
            "show": prompt.get("show", spec.conductor.show),
            # Greedy, as its held-out tables were measured: sampling at a pool's default temperature made a
            # 135M conductor garble the long subtasks it had learned (e.g. the write-a-program wording).
            "temperature": 0.0,
        }
    )
    return spec.model_copy(update={"conductor": conductor}), {"examples": bool(prompt.get("examples", True))}


class TransformersOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device: str = "cpu"  # or "cuda", "cuda:1", ...
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    threads: Optional[int] = Field(None, gt=0)  # torch CPU threads


class TransformersProvider(Provider):
    """Generates with a transformers model in a worker thread (one generation at a time per model)."""

    Options = TransformersOptions
    retry_timeouts = False
    requires = ("torch", "transformers")
    extra = "train"

    def __init__(self, spec: WorkerSpec, *, model=None, tokenizer=None):
        super().__init__(spec)
        if not spec.model and model is None:
            raise PoolConfigError(f"worker {spec.name!r}: provider 'transformers' needs model = a local checkpoint dir")
        self._model, self._tokenizer = model, tokenizer
        self._lock = threading.Lock()

    @classmethod
    def from_model(cls, model, tokenizer, name: str = "live-model") -> "TransformersProvider":
        """Wrap an already loaded model (e.g. the one being trained)."""
        return cls(WorkerSpec(name=name, provider="transformers", model=""), model=model, tokenizer=tokenizer)

    def _load(self):
        if self._model is None:
            o = self.options
            if o.threads:
                import torch

                torch.set_num_threads(o.threads)
            self._model, self._tokenizer = load_checkpoint(self.spec.model, device=o.device, dtype=o.dtype)
        return self._model, self._tokenizer

    def _generate(self, messages, max_tokens: int, temperature: float, seed: Optional[int]) -> Completion:
        import torch

        with self._lock:
            model, tok = self._load()
            enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            if seed is not None:
                torch.manual_seed(seed)
            sampling = dict(do_sample=True, temperature=temperature, top_p=self.spec.top_p or 1.0) if temperature > 0 else dict(do_sample=False)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id, **sampling)
            new = out[0, enc["input_ids"].shape[1] :]
            text = tok.decode(new, skip_special_tokens=True)
            finish = "length" if len(new) >= max_tokens else "stop"
            return Completion(
                text=text,
                usage=Usage(input_tokens=int(enc["input_ids"].shape[1]), output_tokens=int(len(new))),
                finish_reason=finish,
                model=str(self.spec.model or self.spec.name),
            )

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer=None) -> Completion:
        # Nothing of a request's answer format is native here (``native`` is empty): it arrives prepared.
        try:
            completion = await asyncio.to_thread(self._generate, messages, max_tokens, temperature, seed)
        except PoolConfigError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            raise ProviderError(f"transformers worker {self.spec.name!r}: {exc}") from exc
        if on_token is not None and completion.text:
            on_token(completion.text)
        return completion
