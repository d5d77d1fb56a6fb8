"""Providers: one small class per backend kind, registered by name (see ``pool.register_provider``).

Heavy SDKs are imported only when a worker of that kind is built.
"""

from ..pool import register_provider


@register_provider("openai")
def _openai(spec):
    from .openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(spec)


@register_provider("anthropic")
def _anthropic(spec):
    from .anthropic import AnthropicProvider

    return AnthropicProvider(spec)


@register_provider("gemini")
def _gemini(spec):
    from .gemini import GeminiProvider

    return GeminiProvider(spec)


@register_provider("local_gguf")
def _local(spec):
    from .local_gguf import LocalGGUFProvider

    return LocalGGUFProvider(spec)


@register_provider("transformers")
def _transformers(spec):
    from .transformers_local import TransformersProvider

    return TransformersProvider(spec)


@register_provider("simulated")
def _simulated(spec):
    from .simulated import SimulatedProvider

    return SimulatedProvider(spec)


@register_provider("conductor")
def _conductor(spec):
    from .simulated import RecursionMarker

    return RecursionMarker(spec)
