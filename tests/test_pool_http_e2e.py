"""The whole path of issue 69 on real HTTP, all real processes on loopback and no network: two packaged models
(Qwen2.5-Coder-0.5B and SmolLM2-135M GGUFs from their PyPI packages) behind genuine llama.cpp HTTP servers
(tests/llama_http_server.py: xllamacpp's server, the one local_gguf runs in-process), a pool file of two `openai`
workers on them plus the `python` tool, `conductor fit POOL` with the smallest settings that reach a verdict, then
`conductor serve --pool POOL` with what the fit ships (its conductor or its lookup, as its JSON result line says) and
the official openai SDK: plain, streamed and json_object requests, and the trace's record of who planned.

Heavy: minutes on two shared cores. The fidelity bar is 0 so that a 2-question copy reaches the evaluation and the
verdict; the bar's refusal is tests/test_fit_quality.py's. The prompted conductor's JSON-schema plan is checked on the
same servers (one `conductor ask`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from _server_kit import free_port

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(1800)]
pytest.importorskip("xllamacpp", reason="the llama.cpp servers need the local extra: pip install 'openconductor[local]'")

HERE = Path(__file__).parent
MODELS = {"qwen-coder": "qwen2.5-coder-0.5b-instruct", "smollm2": "smollm2-135m-instruct"}
FIT = ["--task", "basic_arithmetic", "--per-task", "2", "--profile-n", "1", "--screen-rounds", "1", "--finalists", "1", "--eval-n", "1",
       "--copy-epochs", "1", "--max-copy-epochs", "1", "--fidelity-bar", "0", "--threads", "1"]
QUESTION = [{"role": "user", "content": "What is 12 + 30?"}]

POOL = """name = "http-e2e"
{workers}
[[workers]]
name = "python"
provider = "python"
description = "runs the Python program in its subtask or in the responses it can see, and returns what it prints"
concurrency = 2
timeout_s = 60
max_retries = 0
options = {{ wall_s = 10, cpu_s = 5 }}

[conductor]
worker = "qwen-coder"
max_steps = 2
"""
WORKER = """[[workers]]
name = "{name}"
provider = "openai"
model = "{name}"
base_url = "{url}/v1"
description = "{description}"
temperature = 0.2
max_tokens = 128
concurrency = 2
timeout_s = 300
"""
DESCRIPTIONS = {"qwen-coder": "Qwen2.5-Coder-0.5B: writes short correct Python programs", "smollm2": "SmolLM2-135M: a tiny, fast chat model"}


def env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OPENCONDUCTOR_TRACES=str(tmp / "traces.sqlite3"))


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """Two llama.cpp HTTP servers, one per packaged model; each serves until its stdin closes."""
    from openconductor.pool import PoolConfigError
    from openconductor.providers.local_gguf import resolve_model

    try:
        for model in MODELS.values():
            resolve_model(model)
    except PoolConfigError as exc:
        pytest.skip(f"a packaged model is not installed: {exc}")
    tmp = tmp_path_factory.mktemp("llama")
    servers = {name: subprocess.Popen([sys.executable, str(HERE / "llama_http_server.py"), model], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env(tmp))
               for name, model in MODELS.items()}
    try:
        yield {name: process.stdout.readline().strip() for name, process in servers.items()}
    finally:
        for process in servers.values():
            process.stdin.close()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def pool_file(endpoints, tmp_path_factory) -> Path:
    assert all(url.startswith("http://127.0.0.1:") for url in endpoints.values()), endpoints
    workers = "\n".join(WORKER.format(name=name, url=url, description=DESCRIPTIONS[name]) for name, url in endpoints.items())
    path = tmp_path_factory.mktemp("pool") / "pool.toml"
    path.write_text(POOL.format(workers=workers))
    return path


def conductor(*args: str, tmp: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openconductor", *args], env=env(tmp), capture_output=True, text=True, timeout=timeout)


def events(stdout: str) -> list[dict]:
    """The fit's JSON lines (stdout is not a TTY)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def wait_for(sdk: openai.OpenAI, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            sdk.models.list()
            return
        except openai.APIConnectionError:
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read() if process.poll() is not None else "no start"
            time.sleep(0.5)


def test_fit_then_serve_the_pool_over_http(pool_file, tmp_path):
    fitted = conductor("fit", str(pool_file), *FIT, "--out", str(tmp_path / "fit"), tmp=tmp_path, timeout=1500)
    lines = events(fitted.stdout)
    result = next((e for e in lines if e["event"] == "result"), None)
    assert result is not None, fitted.stdout[-2000:] + fitted.stderr[-2000:]
    assert fitted.returncode == 0 and result["status"] == "done" and result["ship"] in ("conductor", "lookup"), result
    assert {e["stage"] for e in lines if e["event"] == "stage_end"} >= {"profile", "search", "targets", "copy"}
    assert "too few targets" in fitted.stdout  # 2 questions: the fit says so
    command = result["use"]["conductor_serve" if result["ship"] == "conductor" else "lookup_serve"]
    assert command[:4] == ["conductor", "serve", "--pool", str(pool_file)]

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "openconductor", *command[1:], "--port", str(port), "--log-level", "warning"],
                              env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
        wait_for(sdk, server)
        model = sdk.models.list().data[0].id
        plain = sdk.chat.completions.create(model=model, messages=QUESTION)
        chunks = list(sdk.chat.completions.create(model=model, messages=QUESTION, stream=True))
        as_json = sdk.chat.completions.create(model=model, response_format={"type": "json_object"},
                                              messages=[{"role": "user", "content": "What is 12 + 30? Reply as a JSON object with key answer."}])
        trace = httpx.get(f"http://127.0.0.1:{port}{plain.model_extra['conductor']['trace_url']}", timeout=30).json()
    finally:
        server.terminate()
        server.wait(timeout=30)

    assert plain.object == "chat.completion" and plain.choices[0].message.role == "assistant" and plain.choices[0].message.content
    assert plain.usage.total_tokens > 0 and plain.model_extra["conductor"]["status"] == "ok"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed and chunks[-1].object == "chat.completion.chunk"
    assert isinstance(json.loads(as_json.choices[0].message.content), dict)
    planned = plain.model_extra["conductor"]["planned_by"]  # who planned: the fit's lookup table, or its checkpoint and digest
    if result["ship"] == "lookup":
        assert planned["kind"] == "policy" and planned["policy"].startswith("lookup"), planned
    else:
        assert planned["kind"] == "checkpoint" and planned.get("sha256"), planned
    assert trace["metadata"]["conductor"] == planned  # the trace records the same


def test_a_prompted_conductor_plans_under_the_json_schema_on_llama_cpp(pool_file, tmp_path):
    """The pool's [conductor] worker is an `openai` worker on llama.cpp's server: its plan is decoded under the planning
    format's JSON schema and parses on the first attempt."""
    asked = conductor("ask", "--pool", str(pool_file), "--policy", "conductor", "--json", "--no-trace", "What is 17 * 23?", tmp=tmp_path,
                      timeout=600)
    assert asked.returncode == 0, asked.stderr[-2000:]
    run = json.loads(asked.stdout)
    plan = json.loads(run["plan"]["raw"])  # the reply is the schema's JSON object
    assert set(plan) == {"reasoning", "steps"} and 1 <= len(plan["steps"]) <= 2
    assert run["plan"]["attempts"] == 1 and run["plan"]["fallback"] is None and not run["plan"]["errors"]
    assert run["metadata"]["conductor"] == {"kind": "prompted", "policy": "conductor", "worker": "qwen-coder", "provider": "openai",
                                            "model": "qwen-coder"}
