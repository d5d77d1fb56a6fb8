"""What every `conductor` command shares: the consoles and how a command fails."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on stderr and exit. The message is literal text: a hint such as
    ``pip install 'openconductor[serve]'`` must not be read as rich markup."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def needs_extra(extra: str, exc: ImportError) -> None:
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
