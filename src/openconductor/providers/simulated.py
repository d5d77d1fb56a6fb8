"""Simulated workers for tests and load: deterministic per seed, fixed latency, injected failures.

Not a model: numbers measured with these workers must be labelled as simulated. A ``world`` option
names a registered responder that decides the text: a built-in world (``BUILTIN_WORLDS``, e.g. the
paper-calibrated ``paper-v2`` in ``sim/world.py``) is imported when a pool first names it; another
registers itself from the module a worker's ``world_module`` option names.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import random
import time
from typing import Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..answer_format import AnswerFormat, new_call_id
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion, ToolCall, Usage
from .base import Provider, ProviderError, TokenCallback

# A worker's context holds this once the caller has run a tool (see server/requests.render_question).
TOOL_RESULT_MARK = "Tool result"


def schema_instance(schema: dict, text: str):
    """A value of ``schema``'s shape filled with ``text`` (simulated JSON output; not a general generator)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: schema_instance(props[k], text) for k in schema.get("required", list(props))} if props else {"answer": text}
    return {"string": text, "integer": len(text.split()), "number": float(len(text.split())), "boolean": True, "array": []}.get(kind, text)


def _reply(answer: AnswerFormat, text: str, prompt: str) -> tuple[str, list[ToolCall], dict]:
    """The simulated final step: it calls the first offered tool until a tool result is in its context."""
    tools = answer.offered_tools
    if tools and (TOOL_RESULT_MARK not in prompt or answer.tool_choice == "required"):
        args = {k: schema_instance(v, "simulated") for k, v in tools[0].parameters.get("properties", {}).items()}
        return "", [ToolCall(id=new_call_id(), name=tools[0].name, arguments=json.dumps(args))], {"finish_reason": "tool_calls"}
    if answer.json_format is not None:
        return json.dumps(schema_instance((answer.json_format.json_schema or {"type": "object"}), text)), [], {}
    for stop in answer.stop:
        if stop in text:
            return text[: text.index(stop)], [], {"finish_reason": "stop"}
    return text, [], {}

# world name -> fn(spec, messages, rng) -> text
RESPONDERS: dict[str, Callable[[WorkerSpec, list[dict], random.Random], str]] = {}

# The worlds that ship with the package: world name -> the module that registers it.
BUILTIN_WORLDS = {"paper-v2": "openconductor.sim.world", "paper-v3": "openconductor.sim.world_v3"}
# What measures a simulated worker left without a profile (its accuracy per area in world v3), loaded by name
# when first asked, like a built-in world: the simulated world sits above the providers that read it.
MEASURED_BY = "openconductor.sim.pools"
# world_module values of older pool files -> where that world lives now.
MOVED_WORLD_MODULES = {"openconductor.train.world": "openconductor.sim.world"}


def register_responder(name: str):
    def deco(fn):
        RESPONDERS[name] = fn
        return fn

    return deco


class SimulatedOptions(BaseModel):
    """A world's responder reads its own options (e.g. the training world's ``skills``), so those are
    allowed next to the fields below, but only when a ``world`` is set."""

    model_config = ConfigDict(extra="allow")

    latency_s: float = Field(0.0, ge=0)
    jitter_s: float = Field(0.0, ge=0)
    fail_rate: float = Field(0.0, ge=0, le=1)
    fail_first: int = Field(0, ge=0)  # the first N calls fail
    failure: Literal["error", "retryable", "timeout", "empty"] = "error"
    world: Optional[str] = None  # a registered responder that decides the text
    world_module: Optional[str] = None  # imported first: it registers a world that is not built in
    seed: int = 0

    @model_validator(mode="after")
    def _extras_need_a_world(self) -> "SimulatedOptions":
        if self.model_extra and self.world is None:
            raise ValueError(f"unknown option(s) {', '.join(sorted(self.model_extra))} (only a world's responder reads extra options; no world is set)")
        return self


class SimulatedProvider(Provider):
    """Options in ``SimulatedOptions``. Given a request's tools it calls the first one (arguments
    filled from its schema) until a tool result is in its context."""

    native = frozenset({"tools", "json_schema", "stop"})
    Options = SimulatedOptions

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        o = self.options
        self.latency_s, self.jitter_s, self.fail_rate, self.fail_first = o.latency_s, o.jitter_s, o.fail_rate, o.fail_first
        self.failure, self.world, self.seed = o.failure, o.world, o.seed
        if o.world_module in MOVED_WORLD_MODULES:
            raise PoolConfigError(
                f"simulated worker {spec.name!r}: world_module {o.world_module!r} no longer exists (the world moved to "
                f"{MOVED_WORLD_MODULES[o.world_module]!r}); built-in worlds ({', '.join(sorted(BUILTIN_WORLDS))}) need no "
                "world_module: delete it from the worker's options")
        module = o.world_module or (BUILTIN_WORLDS.get(self.world) if self.world not in RESPONDERS else None)
        if module:
            try:
                importlib.import_module(module)  # registers its responder(s)
            except ImportError as exc:
                raise PoolConfigError(f"simulated worker {spec.name!r}: cannot import world_module {module!r}: {exc}") from exc
        if self.world is not None and self.world not in RESPONDERS:
            raise PoolConfigError(f"simulated worker {spec.name!r}: unknown world {self.world!r}; known: {sorted(set(RESPONDERS) | set(BUILTIN_WORLDS))}")
        self.calls = 0

    @classmethod
    def measured_profile(cls, spec: WorkerSpec) -> dict[str, float]:
        return importlib.import_module(MEASURED_BY).measured_profile(spec)

    def _rng(self, messages: list[dict], seed: Optional[int]) -> random.Random:
        identity = self.spec.options.get("identity") or self.spec.name  # as the world's luck (sim/world.py Traits)
        key = f"{self.seed}|{seed}|{identity}|{messages!r}".encode()
        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        self.calls += 1
        start = time.perf_counter()
        # The call's luck, drawn only where something reads it (jitter, failures, a world): hashing the whole
        # context costs more than the rest of a call without them, and load tests make millions of calls.
        rng = self._rng(messages, seed) if self.jitter_s or self.fail_rate or self.world is not None else None
        delay = self.latency_s + (rng.uniform(0, self.jitter_s) if rng is not None and self.jitter_s else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if self.calls <= self.fail_first or (rng is not None and self.fail_rate and rng.random() < self.fail_rate):
            if self.failure == "timeout":
                await asyncio.sleep(self.spec.timeout_s + 1)
            if self.failure == "empty":
                return Completion(text="", usage=Usage(input_tokens=1), latency_s=time.perf_counter() - start)
            raise ProviderError(f"simulated {self.failure}", retryable=self.failure == "retryable")
        if rng is not None and self.world is not None:
            text = RESPONDERS[self.world](self.spec, messages, rng)
        else:
            digest = hashlib.sha256(repr(messages).encode()).hexdigest()[:8]
            text = f"{self.spec.name} answer {digest}"
        words = text.split(" ")
        finish = "length" if len(words) > max_tokens else "stop"
        text = " ".join(words[:max_tokens])
        calls: list[ToolCall] = []
        if answer is not None:
            text, calls, extra = _reply(answer, text, "".join(str(m.get("content", "")) for m in messages))
            finish = extra.get("finish_reason", finish)
            words = text.split(" ") if text else []
        if on_token is not None:
            for i, word in enumerate(words[:max_tokens]):
                on_token(word if i == 0 else " " + word)
        prompt_tokens = sum(_word_count(str(m.get("content", ""))) for m in messages)
        return Completion(text=text, tool_calls=calls, usage=Usage(input_tokens=prompt_tokens, output_tokens=min(len(words), max_tokens)),
                          latency_s=time.perf_counter() - start, model=self.spec.model or "simulated", finish_reason=finish)


# ASCII bytes mapped to b" " (whitespace as str.split() reads it, \x1c-\x1f included) or b"w" (any other).
_SPACE_OR_WORD = bytes(32 if chr(i).isspace() else 119 for i in range(128)) + b"w" * 128


def _word_count(text: str) -> int:
    """``len(text.split())``: for ASCII text counted in C without building the words (a 900 KB message took
    35-75 ms on the event loop to split; issue 70)."""
    if not text.isascii():
        return len(text.split())
    marks = b" " + text.encode("ascii").translate(_SPACE_OR_WORD)
    return marks.count(b" w")


class RecursionMarker(Provider):
    """The pool entry that stands for the conductor itself; the executor runs it as a nested round."""

    async def complete(self, messages, **kwargs) -> Completion:  # pragma: no cover - never called
        raise ProviderError("a conductor worker is run by the executor as a recursive round, not called")
