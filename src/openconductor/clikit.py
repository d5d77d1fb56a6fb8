"""What every `conductor` command shares: the consoles and how a command fails."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from .pool import PoolSpec

console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit. The message is literal text: a hint such as
    ``pip install 'openconductor[serve]'`` must not be read as rich markup."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


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


def load_pool_or_default(path: Optional[Path], conductor_dir: Optional[Path] = None) -> tuple["PoolSpec", dict]:
    """The pool file (or the packaged local pool), with a trained conductor checkpoint as its conductor
    backend when ``conductor_dir`` is given. Returns (pool spec, the conductor policy's extra options)."""
    from .pool import PoolConfigError, load_default_pool, load_pool

    try:
        spec = load_pool(path) if path else load_default_pool()
        if conductor_dir is None:
            return spec, {}
        from .providers.transformers_local import trained_conductor

        return trained_conductor(spec, conductor_dir)
    except PoolConfigError as exc:
        fail(str(exc))
