"""CONTRIBUTING.md's promise: a provider, a task or a tool is one new file. Each test writes that one file
(the code block CONTRIBUTING.md shows for it), and uses it through the public API only: a pool file naming the
provider, `conductor eval --task NAME`, a fixed workflow through the tool. The workers here are toy
backends written by the tests, not models: no number here is a measurement."""

from __future__ import annotations

import importlib
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import openconductor.providers as providers_package
import openconductor.tasks as tasks_package
from openconductor.cli import app
from openconductor.executor import solve
from openconductor.graders import base as graders_base
from openconductor.policies import make_policy
from openconductor.policies.specs import parse_policy_specs
from openconductor.pool import TOOL_PROVIDERS, Pool, load_pool
from openconductor.providers import base as providers_base
from openconductor.tasks import base as tasks_base

ROOT = Path(__file__).resolve().parents[1]
# The files CONTRIBUTING.md shows, as it shows them (each code block follows a "<!-- file: PATH -->" line).
FILES = dict(re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", (ROOT / "CONTRIBUTING.md").read_text(), re.S))
PROVIDER, TOOL, TASK = FILES["providers/last_word.py"], FILES["shout_tool.py"], FILES["tasks/say_the_word.py"]

POOL = """
name = "contrib"
[[workers]]
name = "echo"
provider = "last-word"
[[workers]]
name = "loud"
provider = "shout"
[workflows.echo-then-shout]
steps = [{ worker = "echo", subtask = "Answer.", access = [] }, { worker = "loud", subtask = "Shout it.", access = "all" }]
"""


@pytest.fixture
def registries(monkeypatch):
    """Whatever a test registers is forgotten after it (the registries are process-wide)."""
    monkeypatch.setattr(providers_base, "_PROVIDERS", dict(providers_base._PROVIDERS))
    saved_tools = set(providers_base.TOOLS)
    monkeypatch.setattr(tasks_base, "_TASKS", dict(tasks_base._TASKS))
    monkeypatch.setattr(graders_base, "_REGISTRY", dict(graders_base._REGISTRY))
    before = set(sys.modules)
    yield
    providers_base.TOOLS.intersection_update(saved_tools)
    for name in set(sys.modules) - before:
        if name.startswith(("openconductor.providers.", "openconductor.tasks.", "contrib_")):
            del sys.modules[name]


def add_to_package(monkeypatch, package, tmp_path, name: str, source: str) -> None:
    """As if the file were added to the package's folder (its folder stays untouched)."""
    folder = tmp_path / package.__name__.replace(".", "_")
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])


def own_module(monkeypatch, tmp_path, name: str, source: str):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_a_provider_is_one_file_in_the_package_and_a_pool_file_names_it(registries, monkeypatch, tmp_path):
    add_to_package(monkeypatch, providers_package, tmp_path, "last_word", PROVIDER)
    own_module(monkeypatch, tmp_path, "contrib_shout", TOOL)
    (tmp_path / "pool.toml").write_text(POOL)
    spec = load_pool(tmp_path / "pool.toml")  # found by its decorator: no import, no registry edit

    async def ask():
        async with Pool(spec) as pool:
            return await solve("Please say the word maple", make_policy("single", worker="echo"), pool)

    import asyncio

    run = asyncio.run(ask())
    assert run.status == "ok" and run.final_answer == "Final answer: maple"


def test_a_tool_is_one_file_and_no_baseline_asks_it_a_question(registries, monkeypatch, tmp_path):
    add_to_package(monkeypatch, providers_package, tmp_path, "last_word", PROVIDER)
    own_module(monkeypatch, tmp_path, "contrib_shout", TOOL)
    assert "shout" in TOOL_PROVIDERS
    (tmp_path / "pool.toml").write_text(POOL)
    spec = load_pool(tmp_path / "pool.toml")
    assert [label for label, _ in parse_policy_specs(["single:*"], spec)] == ["single:echo"]  # a tool answers nothing alone

    async def ask():
        async with Pool(spec) as pool:
            shouted = await solve("Please say the word ember", make_policy("fixed", workflow="echo-then-shout"), pool)
            moa = await solve("Please say the word ember", make_policy("moa"), pool)
        return shouted, moa

    import asyncio

    shouted, moa = asyncio.run(ask())
    assert shouted.final_answer == "FINAL ANSWER: EMBER" and [s.worker_name for s in shouted.steps] == ["echo", "loud"]
    assert {s.worker_name for s in moa.steps} == {"echo"}


def test_a_task_is_one_file_in_the_package_and_conductor_eval_runs_it(registries, monkeypatch, tmp_path):
    add_to_package(monkeypatch, providers_package, tmp_path, "last_word", PROVIDER)
    add_to_package(monkeypatch, tasks_package, tmp_path, "say_the_word", TASK)
    own_module(monkeypatch, tmp_path, "contrib_shout", TOOL)
    (tmp_path / "pool.toml").write_text(POOL)
    listed = CliRunner().invoke(app, ["tasks"])
    assert listed.exit_code == 0 and "say-the-word" in listed.output
    result = CliRunner().invoke(app, ["eval", "--task", "say-the-word", "--limit", "4", "--pool", str(tmp_path / "pool.toml"),
                                      "-p", "single:echo", "--out", str(tmp_path / "out"), "--no-cache", "--no-trace"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    [row] = summary["rows"]
    assert (row["task"], row["policy"], row["n"], row["accuracy"]) == ("say-the-word", "single:echo", 4, 1.0)
