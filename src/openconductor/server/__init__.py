"""Serve the conductor as an OpenAI-compatible model (``conductor serve``)."""

from .config import ServerConfig, ServerConfigError, default_config, hash_key, load_server_config, parse_server_config


def __getattr__(name: str):
    # The app needs the `serve` extra (FastAPI); importing the package for its config must not.
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ServerConfig", "ServerConfigError", "create_app", "default_config", "hash_key", "load_server_config", "parse_server_config"]
