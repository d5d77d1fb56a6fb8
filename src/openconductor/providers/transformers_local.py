"""In-process transformers provider: a local checkpoint dir (full model or LoRA adapter) as a worker.

``WorkerSpec.model`` is the directory. An adapter dir (``adapter_config.json``) is loaded on top of
its base model with peft (``conductor.checkpoint.load_checkpoint``); a trained conductor's checkpoint
plans with it when it has no llama.cpp copy (``conductor.checkpoint.trained_conductor``). Options:
``TransformersOptions``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..conductor.checkpoint import load_checkpoint
from ..records import Completion, Usage
from ..spec import PoolConfigError, WorkerSpec
from ..workflow import WorkflowFormat
from .base import Provider, ProviderError, TokenCallback


class TransformersOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device: str = "cpu"  # or "cuda", "cuda:1", ...
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    threads: Optional[int] = Field(None, gt=0)  # torch CPU threads


class TransformersProvider(Provider):
    """Generates with a transformers model in a worker thread (one generation at a time per model).

    Takes the conductor's workflow grammar (``workflow.FormatGrammar``): decoding then walks the same
    format automaton as the training rollouts, so every plan parses, as on llama.cpp. Other GBNF text
    is refused (this engine has no general GBNF decoder)."""

    Options = TransformersOptions
    retry_timeouts = False
    supports_grammar = True
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

    def _generate(self, messages, max_tokens: int, temperature: float, seed: Optional[int],
                  fmt: Optional[WorkflowFormat] = None) -> Completion:
        import torch

        with self._lock:
            model, tok = self._load()
            enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            if seed is not None:
                torch.manual_seed(seed)
            if fmt is not None:
                new, finish = self._constrained(model, tok, enc["input_ids"][0].tolist(), fmt, max_tokens, temperature, seed)
            else:
                sampling = dict(do_sample=True, temperature=temperature, top_p=self.spec.top_p or 1.0) if temperature > 0 else dict(do_sample=False)
                with torch.no_grad():
                    out = model.generate(**enc, max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id, **sampling)
                new = out[0, enc["input_ids"].shape[1] :].tolist()
                finish = "length" if len(new) >= max_tokens else "stop"
            text = tok.decode(new, skip_special_tokens=True)
            return Completion(
                text=text,
                usage=Usage(input_tokens=int(enc["input_ids"].shape[1]), output_tokens=int(len(new))),
                finish_reason=finish,
                model=str(self.spec.model or self.spec.name),
            )

    def _constrained(self, model, tok, prompt_ids: list[int], fmt: WorkflowFormat, max_tokens: int, temperature: float,
                     seed: Optional[int]) -> tuple[list[int], str]:
        """Tokens of one completion that stays inside ``fmt`` (the training rollouts' sampler), and why it ended."""
        import torch

        from ..decoding import TokenConstraint, sample_group

        eos = tok.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        generator = torch.Generator().manual_seed(seed if seed is not None else 0)
        (row,) = sample_group(model, prompt_ids, 1, max_new_tokens=max_tokens, eos_ids=eos_ids, temperature=temperature,
                              top_p=self.spec.top_p or 1.0, generator=generator,
                              constraint=TokenConstraint(tok, eos_ids), fmt=fmt)
        return row, ("stop" if row and row[-1] in eos_ids else "length")

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer=None) -> Completion:
        # Nothing of a request's answer format is native here (``native`` is empty): it arrives prepared.
        fmt = getattr(grammar, "format", None)
        if grammar is not None and not isinstance(fmt, WorkflowFormat):
            raise ProviderError(f"transformers worker {self.spec.name!r}: takes only the conductor's workflow grammar, "
                                "not arbitrary GBNF; use a local_gguf worker for other grammars")
        try:
            completion = await asyncio.to_thread(self._generate, messages, max_tokens, temperature, seed, fmt)
        except PoolConfigError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            raise ProviderError(f"transformers worker {self.spec.name!r}: {exc}") from exc
        if on_token is not None and completion.text:
            on_token(completion.text)
        return completion
