"""What every provider is: the ``Provider`` base class, its errors, and the registry of provider kinds.

A provider kind is one backend (an API, an in-process model, a tool). A pool file names it by its
registered name (``WorkerSpec.provider``); ``provider_class`` looks it up. The built-in kinds are
registered below by module name and imported only when a pool uses them, so a user of remote APIs
never loads llama.cpp or torch, and vice versa. A new kind is one file with one ``Provider`` subclass
and a ``register_provider("name")`` decorator (``tool=True`` for a tool: it answers nothing alone, so
no baseline sends it a question): a file in this package is found by its decorator when a pool first
names it (read from the source, not imported before then); a module elsewhere is imported first.
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
from importlib import import_module
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from ..answer_format import AnswerFormat
from ..configfile import did_you_mean, problems
from ..records import Completion

if TYPE_CHECKING:
    from ..spec import WorkerSpec


class ProviderError(RuntimeError):
    """A worker call that failed. ``retryable`` errors are retried with backoff."""

    def __init__(self, message: str, *, retryable: bool = False, status: Optional[int] = None, retry_after: Optional[float] = None,
                 code: Optional[str] = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.code = code  # a typed cause callers act on, e.g. "context_length_exceeded"


class UnknownProviderError(ValueError):
    """A provider name nobody registered; the message lists the known ones."""


TokenCallback = Callable[[str], None]


class NoOptions(BaseModel):
    """A provider that takes no options."""

    model_config = ConfigDict(extra="forbid")


class Provider:
    """One backend kind. Subclasses implement ``complete``; they raise ProviderError on failure.

    ``native``: what of a request's ``AnswerFormat`` the backend takes itself ("tools", "json_schema",
    "stop"); ``answer_format.prepare`` adapts the rest (prompted tools, prompted JSON, cut stops).
    What a subclass declares is checked when a pool loads, before any call: ``Options`` (a pydantic
    model of its ``options`` table), ``key_envs`` (the environment variables that may hold its API key,
    tried in order; a worker's ``api_key_env`` replaces them) and ``requires`` (modules it imports,
    installed by the ``extra``).
    """

    supports_grammar = False
    # Takes a JSON schema to decode under: the LM conductor's plan format (a ``FormatGrammar``) is sent as its schema.
    supports_json_schema = False
    native: frozenset[str] = frozenset()
    # False for in-process models: a timed-out generation keeps running in its thread, so a retry
    # would only compete with it for the same CPU (and the same slots).
    retry_timeouts = True
    Options: ClassVar[type[BaseModel]] = NoOptions
    key_envs: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str] = ""

    def __init__(self, spec: "WorkerSpec"):
        self.spec = spec
        self.options = self.Options.model_validate(spec.options)

    @classmethod
    def key_variables(cls, spec: "WorkerSpec") -> tuple[str, ...]:
        """Where this worker's API key must come from (one of them set); empty when it needs none."""
        return (spec.api_key_env,) if spec.api_key_env else cls.key_envs

    @classmethod
    def absent_packages(cls, spec: "WorkerSpec") -> list[tuple[str, str]]:
        """(what, the command that installs it) for each package this worker's model needs that is not installed."""
        return []

    @classmethod
    def measured_profile(cls, spec: "WorkerSpec") -> dict[str, float]:
        """The worker's accuracy alone per area when its pool file gives no ``profile`` (what a conductor shown the
        pool's ranking reads): {} where nothing measures it; a simulated worker is measured in its world."""
        return {}

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        grammar: Optional[str] = None,
        on_token: Optional[TokenCallback] = None,
        seed: Optional[int] = None,
        answer: Optional[AnswerFormat] = None,
    ) -> Completion:
        raise NotImplementedError

    def unavailable(self) -> Optional[str]:
        """Why this worker cannot run on this machine (a tool whose system dependency is missing), with the
        fix; None when it can. Checked once when a pool loads: the pool warns and its steps fall back to a model."""
        return None

    async def aclose(self) -> None:
        return None


# ------------------------------------------------------------------------------------------ registry

# provider name -> a function that returns its class (imported when first needed)
_PROVIDERS: dict[str, Callable[[], type[Provider]]] = {}
# The registered kinds that are tools (pool.TOOL_PROVIDERS is this set): they run code or search a corpus
# on what a step can see, and answer nothing on their own.
TOOLS: set[str] = set()


def register_provider(name: str, load: Optional[Callable[[], type[Provider]]] = None, *, tool: bool = False):
    """Register a provider class under ``name``: ``@register_provider("x")`` on the class, or
    ``register_provider("x", load)`` with a function that imports and returns it when first needed.
    ``tool``: a tool worker, not a language model."""
    if tool:
        TOOLS.add(name)
    if load is not None:
        _PROVIDERS[name] = load
        return load

    def deco(cls: type[Provider]) -> type[Provider]:
        _PROVIDERS[name] = lambda: cls
        return cls

    return deco


def provider_class(name: str) -> type[Provider]:
    if name not in _PROVIDERS:
        _discover()
    if name not in _PROVIDERS:
        raise UnknownProviderError(f"no provider named {name!r}{did_you_mean(name, _PROVIDERS)}; known: {', '.join(sorted(_PROVIDERS))}")
    return _PROVIDERS[name]()


def provider_options(provider: str, options: dict[str, Any]) -> BaseModel:
    """``options`` validated by the provider's ``Options`` model (ValueError naming what does not fit)."""
    cls = provider_class(provider)
    try:
        return cls.Options.model_validate(options)
    except ValidationError as exc:
        accepted = ", ".join(cls.Options.model_fields) or "none"
        raise ValueError(f"{problems(exc)} (provider {provider!r} takes options: {accepted})") from None


def make_provider(spec: "WorkerSpec") -> Provider:
    return provider_class(spec.provider)(spec)


def absent_modules(cls: type[Provider]) -> list[str]:
    """The modules a provider class needs that are not installed (a dotted one's package is looked up first:
    find_spec on a submodule of a missing package raises)."""
    return [m for m in cls.requires if importlib.util.find_spec(m.split(".")[0]) is None or importlib.util.find_spec(m) is None]


def _discover() -> None:
    """Register the providers of this package's modules that are not registered yet, from their source's
    ``@register_provider(...)`` decorators: a file added to the package needs no other edit, and is
    imported only when a pool names its kind."""
    known = {module for module, _ in BUILTIN.values()} | {"base", "common"}
    for info in pkgutil.iter_modules(import_module(__package__).__path__):
        spec = importlib.util.find_spec(f"{__package__}.{info.name}")
        if info.name in known or spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for call in (d for d in node.decorator_list if isinstance(d, ast.Call)):
                if getattr(call.func, "id", None) == "register_provider" and call.args and isinstance(call.args[0], ast.Constant):
                    tool = any(k.arg == "tool" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)
                    register_provider(str(call.args[0].value), _lazy(info.name, node.name), tool=tool)


# name -> (module in this package, class)
BUILTIN = {
    "openai": ("openai_compat", "OpenAICompatProvider"),
    "anthropic": ("anthropic", "AnthropicProvider"),
    "gemini": ("gemini", "GeminiProvider"),
    "local_gguf": ("local_gguf", "LocalGGUFProvider"),
    "transformers": ("transformers_local", "TransformersProvider"),
    "simulated": ("simulated", "SimulatedProvider"),
    "conductor": ("simulated", "RecursionMarker"),
    "python": ("python_tool", "PythonToolProvider"),
    "retrieval": ("retrieval", "RetrievalProvider"),
}


def _lazy(module: str, cls: str) -> Callable[[], type[Provider]]:
    def load() -> type[Provider]:
        return getattr(import_module(f"{__package__}.{module}"), cls)

    return load


for _name, (_module, _cls) in BUILTIN.items():
    register_provider(_name, _lazy(_module, _cls), tool=_name in ("python", "retrieval"))
