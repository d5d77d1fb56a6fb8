"""Providers: one small class per backend kind, registered by name (see ``pool.register_provider``).

Each module is imported only when a pool uses that kind, so a user of remote APIs never loads
llama.cpp or torch, and vice versa. A provider class declares its ``Options`` model, the key
variables it reads and the modules it needs (see ``pool.Provider``); pools are checked against them
when they load.
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
    def load():
        return getattr(import_module(f"{__name__}.{module}"), cls)

    return load


for _name, (_module, _cls) in BUILTIN.items():
    register_provider(_name, _lazy(_module, _cls))
