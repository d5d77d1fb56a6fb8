"""What every `conductor` command shares (cli.py and every */cli.py): the consoles and how a command fails."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from .budget import Limits
    from .pool import PoolSpec

console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit. The message is literal text: a hint such as
    ``pip install 'openconductor[serve]'`` must not be read as rich markup."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def exit_cancelled(message: str) -> NoReturn:
    """After Ctrl-C: say what was kept, then exit 130 at once. ``os._exit``: an in-process model
    generating in a worker thread cannot be interrupted, and a normal exit would wait for it to finish;
    what was kept is already on disk (SQLite and results.jsonl are written as work finishes)."""
    import os
    import sys

    err.print(message, highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def needs_extra(extra: str, exc: ImportError) -> NoReturn:
    """Fail with the install command for a missing optional dependency."""
    fail(f"this command needs the {extra} extra ({exc.name or exc} is not installed): pip install 'openconductor[{extra}]'")


def require(extra: str, *modules: str) -> None:
    """Fail up front, naming the extra to install, when a command's optional dependencies are missing."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            needs_extra(extra, exc)


UNTRAINED = "none"  # `--conductor none`: the pool's prompted backend, even where the pool names a checkpoint


def load_pool_or_default(path: Optional[Path], conductor_dir: Optional[Path] = None, *, check: bool = True,
                         engine: str = "auto", trained: bool = True) -> tuple["PoolSpec", dict]:
    """The pool file (or the packaged local pool), with a trained conductor as its conductor backend:
    ``conductor_dir`` if given, else the pool's own ``[conductor] checkpoint`` (``--conductor none`` keeps
    the prompted backend; ``trained=False`` only shows the pool, without loading a checkpoint). Returns
    (pool spec, the conductor policy's extra options); the spec's ``conductor.checkpoint`` says which
    checkpoint plans (None: the prompted backend).
    With ``check``, a missing API key or SDK fails here, before any work starts (``pool.check_pool``)."""
    from .pool import PoolConfigError, check_pool, load_default_pool, load_pool

    try:
        spec = load_pool(path) if path else load_default_pool()
        options: dict = {}
        chosen = str(conductor_dir) if conductor_dir is not None else spec.conductor.checkpoint
        if chosen == UNTRAINED:
            chosen = None
            spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None})})
        if chosen is not None and trained:
            from .conductor.checkpoint import trained_conductor

            spec, options = trained_conductor(spec, chosen, engine=engine)
        if check:
            check_pool(spec)
        return spec, options
    except PoolConfigError as exc:
        fail(str(exc))


# The flag each limit is set by, for messages.
LIMIT_FLAGS = {"max_calls": "--max-calls", "max_tokens": "--max-tokens", "max_cost_usd": "--max-cost", "max_depth": "--max-depth"}


def lowered_limits(ceiling: "Limits", **asked: Optional[float]) -> "Limits":
    """The pool's limits lowered by a command's ``--max-*`` flags (None: flag not given); a value the
    ``Limits`` model rejects (0 or negative calls, ...) fails naming the flag."""
    from pydantic import ValidationError

    from .budget import Limits

    given = {k: v for k, v in asked.items() if v is not None}
    try:
        requested = Limits(**{**ceiling.model_dump(), **given})
    except ValidationError as exc:
        e = exc.errors()[0]
        name = str(e["loc"][0])
        fail(f"{LIMIT_FLAGS.get(name, name)} {e['input']}: {e['msg'].removeprefix('Input ').lower()} "
             f"(leave it out to keep the pool's limit, {getattr(ceiling, name)})")
    return ceiling.tightened(requested)
