"""The package's import structure, read from every file's AST (nothing is imported):

* the runtime never imports training: no module outside ``openconductor/train/`` imports
  ``openconductor.train``, not even inside a function, save the one edge ``COMPOSITION`` names;
* no import cycle among the package's modules at import time (module-level imports, those under
  ``if TYPE_CHECKING:`` excepted; an import inside a function runs later, when every module is loaded).

Both checks are run on a small synthetic package first, so a check that could not fail would show.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Optional

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "openconductor"

# The `conductor` command is the one place that offers training next to the runtime: cli.py registers
# the training subcommands, whose module loads only typer and clikit until a command runs.
COMPOSITION = {("openconductor.cli", "openconductor.train.cli")}


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module under the package dir ``root``."""
    found = {}
    for file in sorted(root.rglob("*.py")):
        parts = list(file.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (file, is_package)
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST, *, module_level: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under ``node``; with ``module_level``, only those that run when the module is
    imported (not inside functions, not under ``if TYPE_CHECKING:``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        elif module_level and isinstance(child, ast.If) and _type_checking(child.test):
            for other in child.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]), module_level=True)
        else:
            yield from _imports(child, module_level=module_level)


def _targets(name: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: dict) -> list[str]:
    """The dotted modules an import statement names (a ``from X import y`` of a submodule y names X.y)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = name.split(".") if is_package else name.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]


def _string_imports(tree: ast.AST) -> Iterator[str]:
    """Modules loaded by name: ``importlib.import_module("...")`` / ``__import__("...")`` with a literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                yield node.args[0].value


def training_imports(root: Path, training: str = "train") -> list[tuple[str, str]]:
    """(module, what it imports) for every import of ``<package>.<training>`` from outside that subpackage."""
    package = root.name
    banned = f"{package}.{training}"
    known = modules(root)
    found = []
    for name, (file, is_package) in known.items():
        if name == banned or name.startswith(banned + "."):
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        named = [t for node in _imports(tree, module_level=False) for t in _targets(name, is_package, node, known)]
        for target in named + list(_string_imports(tree)):
            if target == banned or target.startswith(banned + "."):
                found.append((name, target))
    return sorted(set(found))


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at import time. Importing a.b.c also runs the package
    a.b's __init__ (an edge to it); the importer's own ancestor packages and the top package are
    already being imported when it runs, so they are no edges."""
    package = root.name
    known = modules(root)
    graph: dict[str, set[str]] = {}
    for name, (file, is_package) in known.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(file.read_text(encoding="utf-8")), module_level=True):
            for target in _targets(name, is_package, node, known):
                parts = target.split(".")
                for i in range(2, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in known and step != name and not name.startswith(step + ".") and step != package:
                        edges.add(step)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


# ------------------------------------------------------------------------------------------- the tests


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_checks_catch_violations_in_a_synthetic_package(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "from .core import run\n",
        "pkg/core.py": "from . import helpers\n\ndef run():\n    from .train import loop  # lazy, still training\n",
        "pkg/helpers.py": "import pkg.core\n",  # core -> helpers -> core: a cycle at import time
        "pkg/lazy.py": "def f():\n    from . import typed\n",
        "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import lazy\nelse:\n    import json\n",
        "pkg/loader.py": "import importlib\nMOD = importlib.import_module('pkg.train.loop')\nNAME = 'pkg.train.loop'\n",
        "pkg/sub/__init__.py": "from .leaf import X\n",
        "pkg/sub/leaf.py": "X = 1\nfrom . import other\n",
        "pkg/sub/other.py": "from .. import sub\n",  # its own package: already importing, no edge
        "pkg/train/__init__.py": "",
        "pkg/train/loop.py": "from ..core import run\n",  # training may use the runtime
    })  # fmt: skip
    assert training_imports(pkg) == [("pkg.core", "pkg.train.loop"), ("pkg.loader", "pkg.train.loop")]
    graph = import_graph(pkg)
    assert find_cycle(graph) in (["pkg.core", "pkg.helpers", "pkg.core"], ["pkg.helpers", "pkg.core", "pkg.helpers"])
    assert "pkg.typed" not in graph["pkg.lazy"] and "pkg.lazy" not in graph["pkg.typed"]  # function-level, TYPE_CHECKING
    assert graph["pkg.sub.other"] == set() and graph["pkg.sub"] == {"pkg.sub.leaf"}
    (pkg / "helpers.py").write_text("def later():\n    import pkg.core\n")
    assert find_cycle(import_graph(pkg)) is None


def test_the_runtime_never_imports_training():
    found = set(training_imports(PACKAGE_ROOT))
    assert found - COMPOSITION == set(), f"runtime modules importing openconductor.train: {sorted(found - COMPOSITION)}"
    assert found == COMPOSITION  # the allowed edge is still the one the CLI needs (else drop it from COMPOSITION)


def test_the_training_commands_module_imports_no_training_code_at_import_time():
    """What ``COMPOSITION`` lets cli.py load: only typer and the CLI kit until a training command runs."""
    graph = import_graph(PACKAGE_ROOT)
    assert all(not target.startswith("openconductor.train") for target in graph["openconductor.train.cli"]), graph["openconductor.train.cli"]


def test_no_import_cycle_among_the_packages_modules():
    assert find_cycle(import_graph(PACKAGE_ROOT)) is None
