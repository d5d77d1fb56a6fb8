"""The server's configuration file (TOML): presets (= pool file + policy + limits, pinned by a version),
API keys (stored as sha256 digests, or read from an environment variable) with their ceilings.

    [server]
    max_body_bytes = 1_000_000
    traces = "postgresql://conductor@db/traces"   # or a SQLite file; default: the user's SQLite store
    counters = "redis://cache:6379/0"              # rate, concurrency and quota counters shared by replicas
    workers = 2                                    # server processes on this machine

    [auth]
    required = true

    [[keys]]
    name = "team"
    sha256 = "<hex digest of the key>"   # `conductor serve --hash-key sk-...` prints it
    max_concurrent = 8
    requests_per_minute = 120
    limits = { max_calls = 20, max_tokens = 60000 }

    [models.conductor]
    version = "2026-11-22"
    pool = "default"                       # or a pool file path, relative to this file
    policy = "conductor"
    limits = { max_calls = 6, max_depth = 0 }
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..budget import Limits
from ..configfile import problems, read_config
from ..pool import BUILTIN_CONDUCTOR, PoolConfigError, PoolSpec, check_pool, load_default_pool, load_pool


class ServerConfigError(ValueError):
    """A server config that cannot be used; the message names the file and the field."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ServerSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = Field(1_000_000, gt=0)
    max_json_depth: int = Field(64, ge=4)  # nesting of a request body's arrays and objects
    max_json_values: int = Field(20_000, ge=100)  # JSON values in a request body (bounds its validation's time)
    check_processes: int = Field(1, ge=0, le=64)  # processes that decode and check request bodies (0: threads)
    header_timeout_s: float = Field(10.0, gt=0)  # a request's headers, from the connection (or last response)
    # A request's head (request line and headers), counted before it is parsed: over any of these is a 431.
    max_header_bytes: int = Field(32 * 1024, ge=1024)
    max_headers: int = Field(100, ge=8)
    max_header_line_bytes: int = Field(16 * 1024, ge=256)
    body_timeout_s: float = Field(10.0, gt=0)  # a request's body, from its headers
    # Diagnosis: asyncio debug mode, logging each event-loop step that runs longer than this (slower).
    slow_callback_ms: Optional[float] = Field(None, gt=0)
    # The trace store: a SQLite file path or a postgresql:// URL (replicas share one); default: the
    # user's SQLite store ($OPENCONDUCTOR_TRACES). Put a password in PGPASSWORD or ~/.pgpass, not here.
    traces: Optional[str] = None
    # Where per-key rate, concurrency and daily-quota counters live: in this process (default), or a
    # redis:// URL that every process and replica shares (needed for workers > 1 or replicas).
    counters: Optional[str] = None
    workers: int = Field(1, ge=1, le=64)  # server processes on this machine (one port, shared by the kernel)
    live_runs_kept: int = Field(200, gt=0)  # finished runs kept in memory for the viewer
    # Runs left `running` by a process that died are marked interrupted at start-up and this often.
    sweep_every_s: float = Field(15.0, gt=0)
    # GET /metrics: "public", "key" (any API key) or "operator" (a key with traces = "all").
    metrics: Literal["public", "key", "operator"] = "public"

    @model_validator(mode="after")
    def _line_within_head(self) -> "ServerSection":
        if self.max_header_line_bytes > self.max_header_bytes:
            raise ValueError(f"max_header_line_bytes ({self.max_header_line_bytes}) cannot be over max_header_bytes ({self.max_header_bytes})")
        return self

    @field_validator("counters")
    @classmethod
    def _counters(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("give a redis://, rediss:// or unix:// URL (or leave it out for in-process counters)")
        return value


class AuthSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    required: bool = True
    # Ceilings for anonymous use when required = false.
    anonymous_limits: Limits = Field(default_factory=lambda: Limits(max_calls=20, max_depth=1))
    anonymous_max_concurrent: int = 16
    anonymous_requests_per_minute: float = 600


class KeySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    sha256: Optional[str] = None  # hex digest of the key; the raw key is never stored
    env: Optional[str] = None  # or: an environment variable that holds the raw key
    max_concurrent: int = Field(4, gt=0)
    requests_per_minute: float = Field(60, gt=0)
    burst: Optional[int] = Field(None, gt=0)  # bucket size; default: requests_per_minute / 6, at least 1
    limits: Limits = Field(default_factory=Limits)  # the ceiling a request may lower, never raise
    # Daily quotas (UTC days) over all of the key's requests, shared by replicas through `counters`;
    # a request's budget is lowered to what is left, and a spent quota answers 429 insufficient_quota.
    tokens_per_day: Optional[int] = Field(None, gt=0)
    cost_usd_per_day: Optional[float] = Field(None, gt=0)
    # Which traces the key may read: "own" (runs it started) or "all" (an operator's key).
    traces: Literal["own", "all"] = "own"

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
            raise ValueError("must be the 64-character hex sha256 digest of the key (see `conductor serve --hash-key`)")
        return value.lower() if value else value

    @model_validator(mode="after")
    def _one_source(self) -> "KeySpec":
        if (self.sha256 is None) == (self.env is None):
            raise ValueError(f"key {self.name!r}: give exactly one of sha256 or env")
        return self

    def digest(self) -> Optional[str]:
        if self.sha256 is not None:
            return self.sha256
        raw = os.environ.get(self.env or "")
        return hash_key(raw) if raw else None


class PresetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    pool: str = "default"  # "default" = the offline local pool; else a pool file relative to the config
    policy: str = "conductor"
    policy_options: dict[str, Any] = Field(default_factory=dict)
    # A trained conductor checkpoint dir (`conductor train`'s final/), relative to the config: it
    # becomes the pool's conductor backend, prompted the way it was trained.
    conductor: Optional[str] = None
    max_steps: Optional[int] = Field(None, gt=0)  # overrides the pool's conductor.max_steps
    limits: Optional[Limits] = None  # default: the pool's limits
    description: str = ""

    @model_validator(mode="after")
    def _trained_conductor_needs_the_conductor_policy(self) -> "PresetSpec":
        if self.conductor not in (None, "none") and self.policy != "conductor":
            raise ValueError(f"conductor (a trained checkpoint) plans only with policy = \"conductor\", not {self.policy!r}")
        return self

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,40}", value):
            raise ValueError("use letters, digits, '.', '_' or '-' (e.g. a date like 2026-11-22)")
        return value


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    server: ServerSection = Field(default_factory=ServerSection)
    auth: AuthSection = Field(default_factory=AuthSection)
    keys: list[KeySpec] = Field(default_factory=list)
    models: dict[str, PresetSpec]
    base_dir: Path = Path(".")  # where relative pool paths resolve (the config file's folder)

    @model_validator(mode="after")
    def _check(self) -> "ServerConfig":
        if not self.models:
            raise ValueError("models: declare at least one preset, e.g. [models.conductor]")
        for name in self.models:
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
                raise ValueError(f"models.{name}: preset names use letters, digits, '.', '_' or '-'")
        names = [k.name for k in self.keys]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"keys: names must be unique; repeated: {', '.join(dupes)}")
        if self.auth.required and not self.keys:
            raise ValueError("auth.required is true but no [[keys]] are declared (or set [auth] required = false)")
        return self

    def pool_spec(self, preset: PresetSpec) -> PoolSpec:
        """The preset's pool with its overrides applied."""
        if preset.pool == "default":
            spec = load_default_pool()
        else:
            spec = load_pool(self._path(preset.pool))
        checkpoint = self._checkpoint(preset.conductor) if preset.conductor is not None else spec.conductor.checkpoint
        if checkpoint is None and spec.conductor.checkpoint is not None:  # conductor = "none": the prompted backend plans
            spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None})})
        if checkpoint is not None:  # the preset's, else the pool's own (e.g. the local pool's built-in one)
            from ..conductor.checkpoint import trained_conductor  # torch is imported only on use

            spec, _ = trained_conductor(spec, checkpoint)
        if preset.max_steps is not None:
            spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"max_steps": preset.max_steps})})
        if preset.limits is not None:
            spec = spec.model_copy(update={"limits": preset.limits})
        return spec

    def _checkpoint(self, value: str) -> Optional[str]:
        """A preset's ``conductor``: builtin:NAME as it is, "none" (plan with the prompted backend) as None, else a path."""
        if value == "none":
            return None
        return value if value.startswith(BUILTIN_CONDUCTOR) else str(self._path(value))

    def _path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base_dir / path


def load_server_config(path: str | Path) -> ServerConfig:
    path = Path(path)
    data = read_config(path, ServerConfigError, what="server config")
    return parse_server_config(data, base_dir=path.parent, source=str(path))


def parse_server_config(data: dict, *, base_dir: Path = Path("."), source: str = "server config") -> ServerConfig:
    try:
        config = ServerConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        raise ServerConfigError(f"{source}: {problems(exc)}") from exc
    for name, preset in config.models.items():  # fail at start-up, not on the first request
        try:
            spec = config.pool_spec(preset)
            check_pool(spec)  # keys and SDKs, before the server binds
        except PoolConfigError as exc:
            field = "conductor" if preset.conductor is not None and "checkpoint" in str(exc) else "pool"
            raise ServerConfigError(f"{source}: models.{name}.{field}: {exc}") from exc
        if spec.conductor.checkpoint is not None and preset.policy == "conductor":
            from ..conductor.checkpoint import trained_conductor

            # The checkpoint says how it was prompted in training; the preset's own options win.
            _, trained = trained_conductor(spec, spec.conductor.checkpoint)
            preset.policy_options = {**trained, **preset.policy_options}
    return config


def default_config() -> ServerConfig:
    """`conductor serve` without --config: the local pool, no keys, loopback only."""
    return parse_server_config(
        {
            "auth": {"required": False},
            "models": {
                "conductor": {"version": "local-1", "pool": "default", "policy": "conductor",
                              "description": "the LM conductor over the offline local pool"},
            },
        }
    )


def pool_config_data(pool: Path, *, conductor: Optional[str] = None, passthrough: Sequence[str] = (),
                     lookup: Optional[Path] = None) -> dict[str, Any]:
    """`conductor serve --pool FILE`: the pool file `ask` takes, served without keys on loopback (as without --config).
    Its conductor is the preset ``conductor`` (``conductor``: a checkpoint dir, builtin:NAME or none, as `ask --conductor`);
    with ``lookup`` (a lookup table file, such as the one `conductor fit` ships) that table plans there instead; with
    ``passthrough`` those workers are served instead, each a transparent preset named after it. Paths are absolute."""
    pool = pool.expanduser().resolve()
    if lookup is not None:
        table = str(lookup.expanduser().resolve())
        models = {"conductor": {"version": "lookup-1", "pool": str(pool), "policy": "lookup", "policy_options": {"table": table},
                                "description": f"the lookup table {table} on {pool.name}"}}
    elif passthrough:
        models = {name: {"version": "passthrough-1", "pool": str(pool), "policy": "passthrough", "policy_options": {"worker": name},
                         "description": f"worker {name!r} of {pool.name}, the caller's messages untouched"} for name in passthrough}
    else:
        if conductor is not None and conductor not in ("none",) and not conductor.startswith(BUILTIN_CONDUCTOR):
            conductor = str(Path(conductor).expanduser().resolve())
        models = {"conductor": {"version": "pool-1", "pool": str(pool), "policy": "conductor", "description": f"the conductor of {pool.name}",
                                **({"conductor": conductor} if conductor is not None else {})}}
    return {"auth": {"required": False}, "models": models}


def with_server_overrides(config: ServerConfig, overrides: dict[str, Any]) -> ServerConfig:
    """``config`` with [server] fields replaced (command-line flags such as --traces), validated."""
    if not overrides:
        return config
    try:
        server = ServerSection.model_validate({**config.server.model_dump(), **overrides})
    except ValidationError as exc:
        raise ServerConfigError(f"command line: {problems(exc)}") from exc
    return config.model_copy(update={"server": server})
