"""`conductor serve --pool FILE` (the pool files `ask` takes) and its transparent mode, `--passthrough WORKER`, with the
openai SDK over real HTTP on loopback (issue 69).

The upstream model is tests/fault_server.py's OpenAI-compatible server (fixed texts, no model); it records every body
it is sent, so what a passthrough worker receives is checked exactly. The conductor preset's pool is SIMULATED.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from _server_kit import free_port, serve, sim_pool
from fault_server import Fault, FaultServer
from openconductor.cli import app
from openconductor.server.config import parse_server_config, pool_config_data
from openconductor.worker_message import PREAMBLE

pytestmark = pytest.mark.timeout(120)

CALLER = [{"role": "system", "content": "You are one step of an outer workflow. Reply with a Python program only."},
          {"role": "user", "content": "Write a program that prints 42."}]


@pytest.fixture(scope="module")
def upstream():
    server = FaultServer(default_text="print(42)").start()
    yield server
    server.stop()


def http_pool(tmp_path: Path, upstream: FaultServer) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(f'name = "mine"\n[[workers]]\nname = "coder"\nprovider = "openai"\nmodel = "coder-model"\nbase_url = "{upstream.url}/v1"\n'
                    '[[workers]]\nname = "helper"\nprovider = "simulated"\n[conductor]\nworker = "helper"\n')
    return path


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_passthrough_sends_the_callers_messages_untouched(tmp_path, upstream):
    upstream.reset("print(42)")
    cfg = parse_server_config(pool_config_data(http_pool(tmp_path, upstream), passthrough=["coder"]))
    with serve(cfg) as url:
        sdk = client(url)
        assert "coder" in [m.id for m in sdk.models.list().data]
        reply = sdk.chat.completions.create(model="coder", messages=CALLER)
        streamed = "".join(c.choices[0].delta.content or "" for c in sdk.chat.completions.create(model="coder", messages=CALLER, stream=True)
                           if c.choices)
        upstream.script(Fault.ok('{"program": "print(42)"}'))
        as_json = sdk.chat.completions.create(model="coder", messages=CALLER, response_format={"type": "json_object"})
    plain, stream, json_mode = (served.body for served in upstream.log)
    assert plain["messages"] == CALLER and stream["messages"] == CALLER  # the system message kept, no agent template
    assert json_mode["response_format"] == {"type": "json_object"}  # the caller's format goes to the worker natively
    assert reply.choices[0].message.content == "print(42)" and streamed == "print(42)"
    assert as_json.choices[0].message.content == '{"program": "print(42)"}'
    assert reply.model_extra["conductor"]["planned_by"] == {"kind": "policy", "policy": "passthrough:coder"}


def test_single_wraps_the_request_in_the_agent_template_which_passthrough_does_not(tmp_path, upstream):
    """Why the mode exists: `policy = "single"` renders the caller's messages into the agent template."""
    upstream.reset("print(42)")
    data = pool_config_data(http_pool(tmp_path, upstream), passthrough=["coder"])
    data["models"]["coder"].update(policy="single")
    with serve(parse_server_config(data)) as url:
        client(url).chat.completions.create(model="coder", messages=CALLER)
    sent = upstream.log[0].body["messages"]
    assert len(sent) == 1 and sent[0]["content"].startswith(PREAMBLE)


def test_serve_pool_serves_the_pools_conductor(tmp_path):
    pool = tmp_path / sim_pool(tmp_path)
    with serve(parse_server_config(pool_config_data(pool))) as url:
        reply = client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
    extra = reply.model_extra["conductor"]
    assert extra["status"] == "ok" and [s["worker"] for s in extra["workflow"]] == ["alpha", "beta"]
    assert extra["planned_by"]["worker"] == "planner" and reply.choices[0].message.content


def test_the_serve_command_takes_a_pool_file(tmp_path, upstream):
    """The real command in a subprocess: `conductor serve --pool FILE --passthrough coder`, then the SDK."""
    upstream.reset("print(42)")
    port = free_port()
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "traces.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "openconductor", "serve", "--pool", str(http_pool(tmp_path, upstream)), "--passthrough", "coder",
               "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        sdk = client(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        while True:
            try:
                reply = sdk.chat.completions.create(model="coder", messages=CALLER)
                break
            except openai.APIConnectionError:
                assert process.poll() is None and time.monotonic() < deadline, process.stdout.read() if process.poll() is not None else "no start"
                time.sleep(0.3)
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert reply.choices[0].message.content == "print(42)" and upstream.log[-1].body["messages"] == CALLER


@pytest.mark.parametrize("args, message", [
    (["--passthrough", "codr"], "--passthrough 'codr': no such worker in"),
    (["--passthrough", "codr"], "did you mean 'coder'?"),
    (["--config", "x.toml"], "give --pool FILE or --config FILE, not both"),
    (["--passthrough", "coder", "--conductor", "builtin:sim-bucket"], "--conductor does not apply"),
])
def test_serve_pool_mistakes_are_clear_errors(tmp_path, upstream, args, message):
    result = CliRunner().invoke(app, ["serve", "--pool", str(http_pool(tmp_path, upstream)), *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_conductor_and_passthrough_need_a_pool():
    result = CliRunner().invoke(app, ["serve", "--passthrough", "coder"])
    assert result.exit_code == 2 and "go with --pool FILE" in " ".join(result.output.split())


async def _outer_run(url: str, stream: bool):
    from openconductor.executor import solve
    from openconductor.policies import make_policy
    from openconductor.pool import Pool, PoolSpec, WorkerSpec

    worker = WorkerSpec(name="upstream", provider="openai", model="down", base_url=f"{url}/v1", max_retries=3)
    async with Pool(PoolSpec(name="outer", workers=[worker])) as pool:
        return await solve("q", make_policy("single"), pool, on_event=(lambda e: None) if stream else None)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_pool_built_on_an_openconductor_server_does_not_rerun_its_failed_workflow(tmp_path, stream):
    """Issue 69: a failed upstream workflow was run 3 more times. Its 502 says x-should-retry: false; a stream's
    in-band error (its headers went out before the run ended) says should_retry: false; the openai provider obeys both."""
    from _server_kit import closed_port_url

    down = tmp_path / "down.toml"
    down.write_text(f'name = "down"\n[[workers]]\nname = "down"\nprovider = "openai"\nmodel = "m"\nbase_url = "{closed_port_url()}/v1"\n'
                    "max_retries = 0\n")
    with serve(parse_server_config(pool_config_data(down, passthrough=["down"]))) as url:
        run = await _outer_run(url, stream)
    step = run.steps[0]
    assert run.status == "error" and step.attempts == 1, step.error
    assert ("error in the stream" if stream else "HTTP 502") in step.error


def test_conductor_none_serves_the_prompted_backend_of_a_pool_with_a_checkpoint(tmp_path):
    """`--conductor none`, as `ask --conductor none`: the pool's checkpoint is not loaded; its backend plans."""
    from _server_kit import sim_worker, write_pool

    conductor = {"checkpoint": "builtin:sim-bucket", "backend": {"name": "planner", "provider": "simulated", "options": {"world": "serve-test-plan"}}}
    pool = tmp_path / write_pool(tmp_path, "ckpt", [sim_worker("alpha"), sim_worker("beta")], conductor=conductor)
    cfg = parse_server_config(pool_config_data(pool, conductor="none"))
    spec = cfg.pool_spec(cfg.models["conductor"])
    assert spec.conductor.checkpoint is None and spec.conductor.backend.name == "planner"
    assert cfg.models["conductor"].conductor == "none"
    assert pool_config_data(pool, conductor="builtin:sim-bucket")["models"]["conductor"]["conductor"] == "builtin:sim-bucket"


def test_the_processes_of_workers_n_read_the_pool_config_back_from_a_file(tmp_path, upstream):
    """`serve --pool FILE --workers 2`: each process reads the generated config from a file (JSON, read as YAML)."""
    from openconductor.server.cli import _written
    from openconductor.server.config import load_server_config

    data = pool_config_data(http_pool(tmp_path, upstream), passthrough=["coder"])
    again = load_server_config(_written(data))
    assert again.models["coder"].policy == "passthrough" and again.models["coder"].policy_options == {"worker": "coder"}
    assert not again.auth.required


def test_serve_pool_serves_the_lookup_a_fit_ships(tmp_path):
    """`conductor serve --pool FILE --lookup TABLE`: the table (as `conductor fit` writes it) plans for the model
    `conductor`, not the pool's conductor (SIMULATED workers)."""
    pool = tmp_path / sim_pool(tmp_path)
    table = tmp_path / "lookup.yaml"
    table.write_text("domains:\n  arithmetic:\n    steps: [{worker: beta, subtask: Answer the question.}]\n"
                     "default:\n  steps: [{worker: beta, subtask: Answer the question.}]\n")
    with serve(parse_server_config(pool_config_data(pool, lookup=table))) as url:
        reply = client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
    extra = reply.model_extra["conductor"]
    assert extra["status"] == "ok" and [s["worker"] for s in extra["workflow"]] == ["beta"]
    assert extra["policy"].startswith("lookup") and reply.choices[0].message.content


@pytest.mark.parametrize("args, message", [
    (["--lookup", "missing.yaml"], "--lookup missing.yaml: no such file"),
    (["--lookup", "{table}", "--conductor", "none"], "it goes without --conductor and --passthrough"),
])
def test_serve_lookup_mistakes_are_clear_errors(tmp_path, args, message):
    pool = tmp_path / sim_pool(tmp_path)
    (tmp_path / "t.yaml").write_text("domains:\n  x:\n    steps: [{worker: beta, subtask: Answer.}]\n")
    args = [a.replace("{table}", str(tmp_path / "t.yaml")) for a in args]
    result = CliRunner().invoke(app, ["serve", "--pool", str(pool), *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split())
