"""Providers: one small class per backend kind, registered by name (see ``pool.register_provider``).

Each module is imported only when a worker of that kind is built, so a user of remote APIs never
loads llama.cpp or torch, and vice versa.
"""

from importlib import import_module

from ..pool import register_provider

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


def _lazy(module: str, cls: str):
    def factory(spec):
        return getattr(import_module(f"{__name__}.{module}"), cls)(spec)

    return factory


for _name, (_module, _cls) in BUILTIN.items():
    register_provider(_name)(_lazy(_module, _cls))
