"""Reading a config file (pool, training, server): TOML or YAML into a dict, errors that name the file.

Each loader passes its own error type (``PoolConfigError``, ``TrainConfigError``, ...) so callers keep
catching what they caught before; ``problems`` turns a pydantic ``ValidationError`` into one line.
"""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml
from pydantic import BaseModel, ValidationError

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


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the choice nearest a mistyped ``name``, else ""."""
    near = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.75)  # 0.75: "opnai" finds openai, "nope" finds nothing
    return f" (did you mean {near[0]!r}?)" if near else ""


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model that holds ``loc``'s last part (walked from ``model``; [] where it cannot tell)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                continue  # a list index or a table's key (workers.1, workflows.NAME): the model is still the one inside
            current = field.annotation
        # Unwrap Optional[X], list[X] and dict[str, X] down to the model inside, if any.
        while typing.get_origin(current) is not None:
            inner = [a for a in typing.get_args(current) if a is not type(None)]
            current = inner[-1] if inner else None
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def problems(exc: ValidationError, name: Optional[Callable[[tuple], str]] = None, model: Optional[type[BaseModel]] = None) -> str:
    """``field.path: message; ...`` for every error; ``name`` may rewrite a location (e.g. to a worker's name).
    With the file's ``model``, an unknown field gets the nearest known one ("did you mean")."""
    parts = []
    for e in exc.errors():
        loc = tuple(e["loc"])
        where = name(loc) if name is not None else ".".join(str(p) for p in loc)
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and model is not None and loc:
            message += did_you_mean(str(loc[-1]), _fields_at(model, loc))
        parts.append(f"{where or '(top level)'}: {message}")
    return "; ".join(parts)
