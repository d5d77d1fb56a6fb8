"""`conductor serve`: the OpenAI-compatible API and the trace viewer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer


def serve(
    config: Optional[Path] = typer.Option(None, "--config", help="Server config (TOML); default: the local pool, no keys, loopback only."),
    host: Optional[str] = typer.Option(None, help="Bind address (overrides server.host in the config)."),
    port: Optional[int] = typer.Option(None, help="Port (overrides server.port in the config)."),
    workers: Optional[int] = typer.Option(None, help="Server processes sharing the port (overrides server.workers)."),
    traces: Optional[str] = typer.Option(None, help="Trace store: a SQLite path or a postgresql:// URL (overrides server.traces)."),
    counters: Optional[str] = typer.Option(None, help="Shared per-key counters: a redis:// URL (overrides server.counters)."),
    hash_key: Optional[str] = typer.Option(None, "--hash-key", help="Print the sha256 digest of KEY for a keys entry in the config, then exit."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
):
    """Serve the conductor as an OpenAI-compatible API, with a trace viewer at /.

    Example: conductor serve --config examples/server.toml --workers 2
    """
    from .config import ServerConfigError, default_config, hash_key as digest, load_server_config, with_server_overrides

    if hash_key is not None:
        typer.echo(digest(hash_key))
        raise typer.Exit(0)
    overrides = {k: v for k, v in (("traces", traces), ("counters", counters), ("workers", workers)) if v is not None}
    try:
        cfg = with_server_overrides(load_server_config(config) if config else default_config(), overrides)
    except ServerConfigError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2)
    try:
        import uvicorn

        from .app import CONFIG_ENV, OVERRIDES_ENV, create_app
        from .protocol import PROTOCOL
    except ImportError as exc:
        typer.secho(f"error: serving needs the serve extra ({exc.name} is missing): pip install 'openconductor[serve]'", fg="red", err=True)
        raise typer.Exit(2)

    if cfg.auth.required and not any(k.digest() for k in cfg.keys):
        names = ", ".join(f"{k.name} (env {k.env})" for k in cfg.keys if k.env)
        typer.secho(f"warning: no usable API key: every request will get 401; set the variable(s) for {names}", fg="yellow", err=True)
    bind_host = host or cfg.server.host
    if not cfg.auth.required and bind_host not in ("127.0.0.1", "localhost", "::1"):
        typer.secho(f"warning: serving without API keys on {bind_host}", fg="yellow", err=True)
    processes = cfg.server.workers
    if processes > 1 and cfg.server.counters is None:
        typer.secho(f"warning: {processes} processes with in-process counters: each key's rate, concurrency and quota limits "
                    "apply per process; set server.counters to a redis:// URL to share them", fg="yellow", err=True)
    loop = "asyncio" if cfg.server.slow_callback_ms else "auto"  # the slow-step log is asyncio's debug mode
    options = dict(host=bind_host, port=port or cfg.server.port, log_level=log_level, loop=loop, http=PROTOCOL,
                   timeout_graceful_shutdown=5, backlog=4096)
    if processes == 1:
        uvicorn.run(create_app(cfg), **options)
    else:  # every process imports the app factory and reads the config itself
        if config:
            os.environ[CONFIG_ENV] = str(config.resolve())
        os.environ[OVERRIDES_ENV] = json.dumps(overrides)
        uvicorn.run("openconductor.server.app:app_from_env", factory=True, workers=processes, **options)
