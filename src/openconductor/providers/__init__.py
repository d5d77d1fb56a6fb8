"""Providers: one small class per backend kind, registered by name (``providers/base.py``).

Each module is imported only when a pool uses that kind, so a user of remote APIs never loads
llama.cpp or torch, and vice versa. A provider class declares its ``Options`` model, the key
variables it reads and the modules it needs (see ``base.Provider``); pools are checked against them
when they load.
"""

from .base import BUILTIN, Provider, ProviderError, make_provider, provider_class, register_provider

__all__ = ["BUILTIN", "Provider", "ProviderError", "make_provider", "provider_class", "register_provider"]
