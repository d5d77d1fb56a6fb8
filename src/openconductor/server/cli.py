"""`conductor serve`: the OpenAI-compatible API and the trace viewer."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional

import typer


def serve(
    config: Optional[Path] = typer.Option(None, "--config", help="Server config (TOML); default: the local pool, no keys, loopback only."),
    pool_file: Optional[Path] = typer.Option(None, "--pool", help="Serve this pool file (the one `ask` takes) as the model `conductor`, no keys, loopback only; instead of --config."),
    conductor_dir: Optional[str] = typer.Option(None, "--conductor", help="With --pool: a trained conductor (a dir or builtin:NAME) that plans, or none for the prompted backend; default: the pool's [conductor] checkpoint."),
    lookup: Optional[Path] = typer.Option(None, "--lookup", help="With --pool: a lookup table file (the OUT/lookup/lookup.yaml a fit ships) plans for the model `conductor` instead of a conductor."),
    passthrough: Optional[list[str]] = typer.Option(None, "--passthrough", help="With --pool: serve worker WORKER as a transparent endpoint (model WORKER): the caller's messages go to it untouched. Repeatable."),
    host: Optional[str] = typer.Option(None, help="Bind address (overrides server.host in the config)."),
    port: Optional[int] = typer.Option(None, help="Port (overrides server.port in the config)."),
    workers: Optional[int] = typer.Option(None, help="Server processes sharing the port (overrides server.workers)."),
    traces: Optional[str] = typer.Option(None, help="Trace store: a SQLite path or a postgresql:// URL (overrides server.traces)."),
    counters: Optional[str] = typer.Option(None, help="Shared per-key counters: a redis:// URL (overrides server.counters)."),
    hash_key: Optional[str] = typer.Option(None, "--hash-key", help="Print the sha256 digest of KEY for a keys entry in the config, then exit."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
):
    """Serve the conductor as an OpenAI-compatible API, with a trace viewer at /.

    Example: conductor serve --pool my_pool.toml   (or --config examples/server.toml --workers 2)
    """
    from .config import ServerConfigError, hash_key as digest, with_server_overrides

    if hash_key is not None:
        typer.echo(digest(hash_key))
        raise typer.Exit(0)
    overrides = {k: v for k, v in (("traces", traces), ("counters", counters), ("workers", workers)) if v is not None}
    try:
        cfg, source = _config(config, pool_file, conductor_dir, passthrough or [], lookup)
        cfg = with_server_overrides(cfg, overrides)
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
        if source is not None:
            os.environ[CONFIG_ENV] = str(_written(source).resolve())
        os.environ[OVERRIDES_ENV] = json.dumps(overrides)
        uvicorn.run("openconductor.server.app:app_from_env", factory=True, workers=processes, **options)


def _config(config: Optional[Path], pool_file: Optional[Path], conductor: Optional[str], passthrough: list[str], lookup: Optional[Path] = None):
    """The server config and where it came from: --config's file, or for --pool the config's data (written to a file
    only for the processes of --workers N); None for the default local pool."""
    from .config import ServerConfigError, default_config, load_server_config, parse_server_config, pool_config_data

    if pool_file is None:
        if conductor is not None or passthrough or lookup is not None:
            raise ServerConfigError("--conductor, --lookup and --passthrough go with --pool FILE (a --config names them per preset)")
        return (load_server_config(config) if config else default_config()), config
    if config is not None:
        raise ServerConfigError("give --pool FILE or --config FILE, not both (a config's presets name their own pools)")
    if conductor is not None and passthrough:
        raise ServerConfigError("--passthrough serves workers as they are; no conductor plans there, so --conductor does not apply")
    if lookup is not None and (conductor is not None or passthrough):
        raise ServerConfigError("--lookup plans with its table: it goes without --conductor and --passthrough")
    if lookup is not None and not lookup.is_file():
        raise ServerConfigError(f"--lookup {lookup}: no such file (a fit writes its lookup to OUT/lookup/lookup.yaml)")
    _check_workers(pool_file, passthrough)
    data = pool_config_data(pool_file, conductor=conductor, passthrough=passthrough, lookup=lookup)
    return parse_server_config(data, base_dir=Path.cwd(), source=f"--pool {pool_file}"), data


def _written(source) -> Path:
    """A config file for each server process: --config's, or --pool's config written out (JSON is YAML)."""
    if isinstance(source, Path):
        return source
    path = Path(tempfile.mkdtemp(prefix="conductor-serve-")) / "server.yaml"
    path.write_text(json.dumps(source))
    return path


def _check_workers(pool_file: Path, names: list[str]) -> None:
    """Every --passthrough names a worker of the pool (a typo gets the nearest name, as in pool files)."""
    from ..configfile import did_you_mean
    from ..pool import PoolConfigError, load_pool
    from .config import ServerConfigError

    try:
        workers = [w.name for w in load_pool(pool_file).workers]
    except PoolConfigError as exc:
        raise ServerConfigError(str(exc)) from None
    for name in names:
        if name not in workers:
            raise ServerConfigError(f"--passthrough {name!r}: no such worker in {pool_file}{did_you_mean(name, workers)} "
                                    f"(workers: {', '.join(workers)})")
