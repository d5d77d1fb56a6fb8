"""Reading a config file (pool, training, server): TOML or YAML into a dict, errors that name the file.

Each loader passes its own error type (``PoolConfigError``, ``TrainConfigError``, ...) so callers keep
catching what they caught before; ``problems`` turns a pydantic ``ValidationError`` into one line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable, Optional

import yaml
from pydantic import ValidationError

YAML_SUFFIXES = frozenset({".yaml", ".yml"})


class ConfigFileError(ValueError):
    """A config file that is missing or does not parse; the message names the file."""


def read_config(path: str | Path, error: type[Exception] = ConfigFileError, *, what: str = "config file") -> dict[str, Any]:
    """The file's top-level table; ``error(message)`` if it is missing, unparseable or not a table."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} not found: {path}")
    is_yaml = path.suffix in YAML_SUFFIXES
    try:
        text = path.read_text(encoding="utf-8")
        data = (yaml.safe_load(text) if is_yaml else tomllib.loads(text)) or {}
    except (yaml.YAMLError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid {'YAML' if is_yaml else 'TOML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise error(f"{path}: expected a table of settings at the top level, got {type(data).__name__}")
    return data


def problems(exc: ValidationError, name: Optional[Callable[[tuple], str]] = None) -> str:
    """``field.path: message; ...`` for every error; ``name`` may rewrite a location (e.g. to a worker's name)."""
    parts = []
    for e in exc.errors():
        loc = tuple(e["loc"])
        where = name(loc) if name is not None else ".".join(str(p) for p in loc)
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where or '(top level)'}: {message}")
    return "; ".join(parts)
