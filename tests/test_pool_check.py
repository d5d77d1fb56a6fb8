"""`conductor pool FILE --check` against endpoints on loopback, and "did you mean" for typos in pool files (issue 69).

The endpoint is tests/fault_server.py's OpenAI-compatible server (scripted replies and faults, no model); a port
nothing listens on stands for a server that is down.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fault_server import Fault, FaultServer
from openconductor.cli import app
from openconductor.pool import PoolConfigError, load_pool

KEY_ENV = "OC_CHECK_TEST_KEY"


@pytest.fixture(scope="module")
def endpoint():
    server = FaultServer(default_text="ok").start()
    yield server
    server.stop()


@pytest.fixture
def server(endpoint, monkeypatch):
    endpoint.reset("ok")
    monkeypatch.setenv(KEY_ENV, "a-wrong-key")
    monkeypatch.setenv("COLUMNS", "200")
    return endpoint


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def pool_file(tmp_path: Path, base_url: str, *, grammar: bool = False) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(f'name = "mine"\n[[workers]]\nname = "coder"\nprovider = "openai"\nmodel = "m"\nbase_url = "{base_url}"\n'
                    f'api_key_env = "{KEY_ENV}"\noptions = {{ grammar = {str(grammar).lower()} }}\n'
                    '[[workers]]\nname = "helper"\nprovider = "simulated"\n')
    return path


def check(path: Path):
    result = CliRunner().invoke(app, ["pool", str(path), "--check"])
    return result.exit_code, " ".join(result.output.split())


def test_a_reachable_pool_is_ready_with_latency_and_a_grammar_it_honours(tmp_path, server):
    server.script(Fault.ok("yes"))  # what llama.cpp's server answers under the probe's grammar
    code, out = check(pool_file(tmp_path, f"{server.url}/v1", grammar=True))
    assert code == 0 and "ready: every key and package this pool needs is here and every worker answered" in out
    assert "coder: ok in " in out and "grammar honoured; JSON schema native" in out
    assert server.log[0].body["grammar"] == 'root ::= "yes"' and len(server.log) == 1


def test_a_declared_grammar_the_server_ignores_is_reported(tmp_path, server):
    code, out = check(pool_file(tmp_path, f"{server.url}/v1", grammar=True))
    assert code == 0 and "grammar ignored" in out


def test_a_server_that_is_down_is_not_ready(tmp_path, server):
    code, out = check(pool_file(tmp_path, f"http://127.0.0.1:{closed_port()}/v1"))
    assert code == 1 and "coder: unreachable:" in out and "not ready: 1 worker(s) failed the check" in out
    assert "ready: every" not in out
    plain = CliRunner().invoke(app, ["pool", str(pool_file(tmp_path, f"http://127.0.0.1:{closed_port()}/v1"))])
    assert plain.exit_code == 0 and "ready:" in plain.output  # without --check nothing is called: it cannot know


def test_a_refused_key_names_its_variable(tmp_path, server):
    server.script(Fault.http(401))
    code, out = check(pool_file(tmp_path, f"{server.url}/v1"))
    assert code == 1 and f"coder: auth: the key was refused (HTTP 401); it comes from {KEY_ENV}" in out
    assert len(server.log) == 1  # no retries


def test_a_missing_key_is_not_called(tmp_path, server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    code, out = check(pool_file(tmp_path, f"{server.url}/v1"))
    assert code == 1 and f"missing key: {KEY_ENV}" in out and "coder: skipped" in out and "helper: ok" in out
    assert server.log == []


POOL = """name = "t"
[[workers]]
name = "coder"
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[[workers]]
name = "helper"
provider = "simulated"
"""


@pytest.mark.parametrize("typo, fixed, hint", [
    ('provider = "openai"', 'provider = "opnai"', "no provider named 'opnai' (did you mean 'openai'?)"),
    ('model = "m"', 'model = "m"\ntemprature = 0.1', "worker 'coder' (workers.0.temprature): Extra inputs are not permitted (did you mean 'temperature'?)"),
    ('name = "t"', 'name = "t"\nstrongst = "coder"', "strongst: Extra inputs are not permitted (did you mean 'strongest'?)"),
])
def test_a_typo_in_a_pool_file_gets_did_you_mean(tmp_path, typo, fixed, hint):
    path = tmp_path / "p.toml"
    path.write_text(POOL.replace(typo, fixed, 1))
    with pytest.raises(PoolConfigError) as err:
        load_pool(path)
    assert hint in str(err.value)


@pytest.mark.parametrize("extra, hint", [
    ('[conductor]\nworker = "helpr"\n', "conductor.worker: unknown worker 'helpr' (did you mean 'helper'?)"),
    ('[conductor]\nmax_step = 3\n', "conductor.max_step: Extra inputs are not permitted (did you mean 'max_steps'?)"),
    ('[limits]\nmax_cals = 3\n', "limits.max_cals: Extra inputs are not permitted (did you mean 'max_calls'?)"),
    ('[workflows.two]\nsteps = [{ worker = "codr", subtask = "x" }]\n', "unknown worker(s) codr (did you mean 'coder'?)"),
    ('[workflows.two]\nstep = [{ worker = "coder", subtask = "x" }]\n', "workflows.two.step: Extra inputs are not permitted (did you mean 'steps'?)"),
])
def test_a_typo_in_a_section_gets_did_you_mean(tmp_path, extra, hint):
    path = tmp_path / "p.toml"
    path.write_text(POOL + extra)
    with pytest.raises(PoolConfigError) as err:
        load_pool(path)
    assert hint in str(err.value)


def test_the_conductor_table_in_providers_md_lists_exactly_the_fields():
    """docs/providers.md's `[conductor]` reference table against ConductorSpec (issue 69 asked for the table)."""
    import re

    from openconductor.pool import ConductorSpec

    text = (Path(__file__).resolve().parents[1] / "docs/providers.md").read_text()
    section = text.split("## The `[conductor]` table", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert listed == list(ConductorSpec.model_fields)
