"""Server config files, the `conductor serve` command, and the incremental answer filter."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from typer.testing import CliRunner

from _server_kit import free_port
from openconductor.cli import app
from openconductor.executor import clean_answer
from openconductor.server import ServerConfigError, hash_key, load_server_config
from openconductor.server.runs import AnswerFilter

ROOT = Path(__file__).resolve().parents[1]


def test_example_config_loads():
    cfg = load_server_config(ROOT / "examples" / "server.toml")
    assert list(cfg.models) == ["conductor", "conductor-ultra", "demo-simulated"]
    fast, ultra = cfg.pool_spec(cfg.models["conductor"]), cfg.pool_spec(cfg.models["conductor-ultra"])
    assert fast.conductor.max_steps == 2 and fast.limits.max_depth == 0
    assert ultra.conductor.max_steps == 3 and ultra.limits.max_depth == 1 and ultra.limits.max_calls == 12
    assert cfg.pool_spec(cfg.models["demo-simulated"]).workers[0].provider == "simulated"
    assert cfg.keys[0].env == "OPENCONDUCTOR_API_KEY"


@pytest.mark.parametrize("text, needle", [
    ('[[keys]]\nname="a"\nsha256="abc"\n[models.m]\nversion="1"', "keys.0.sha256"),
    ('[[keys]]\nname="a"\nsha256="' + "a" * 64 + '"\nenv="X"\n[models.m]\nversion="1"', "exactly one of sha256 or env"),
    ('[models.m]\nversion="1"', "no [[keys]] are declared"),
    ('[auth]\nrequired=false\n[models.m]\nversion="1"\npool="missing.toml"', "pool file not found"),
    ('[auth]\nrequired=false\n[models.m]\nversion="1"\nbogus=1', "models.m.bogus"),
    ('[auth]\nrequired=false\n[models.m]\nversion="latest please"', "models.m.version"),
    ('[auth]\nrequired=false\n[models]', "at least one preset"),
    ('[auth\nrequired=false', "not valid TOML"),
])
def test_bad_configs_name_the_problem(tmp_path, text, needle):
    path = tmp_path / "server.toml"
    path.write_text(text)
    with pytest.raises(ServerConfigError) as exc:
        load_server_config(path)
    assert needle in str(exc.value) and str(path) in str(exc.value)


def test_cli_hash_key_and_bad_config(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--hash-key", "sk-abc"])
    assert result.exit_code == 0 and result.output.strip() == hash_key("sk-abc")
    bad = tmp_path / "bad.toml"
    bad.write_text('[models.m]\nversion="1"')
    result = runner.invoke(app, ["serve", "--config", str(bad)])
    assert result.exit_code == 2


def test_cli_serves_the_example_simulated_preset(tmp_path):
    """`conductor serve --config examples/server.toml` as a real process, with the key from the env."""
    port = free_port()
    env = {**os.environ, "OPENCONDUCTOR_API_KEY": "sk-from-env", "OPENCONDUCTOR_TRACES": str(tmp_path / "t.sqlite3"),
           "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "openconductor", "serve", "--config", str(ROOT / "examples" / "server.toml"),
                             "--port", str(port), "--log-level", "warning"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode() if proc.poll() is not None else "no start"
            time.sleep(0.2)
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-from-env", max_retries=0)
        resp = c.chat.completions.create(model="demo-simulated@1", messages=[{"role": "user", "content": "hello"}])
        ids = [m.id for m in c.models.list()]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert resp.choices[0].message.content.startswith("sim-") and resp.model_extra["conductor"]["steps"] == 3
    assert "conductor-ultra@2026-11-22" in ids


def test_answer_filter_matches_clean_answer_on_any_split():
    rng = random.Random(0)
    # ("a </think> b", a reply that opens mid-thought, is the stream's one documented exception: tests/test_reply.py)
    samples = ["  <think>hmm </thi</think> <answer>The answer is 42</answer>\n", "x < y and a<b <ans", "<THINK>never closed",
               "plain text  ", "<think>a</think> b", "<answer>\n 7 \n</answer>", "q <thinking> r", "<", "", "  \n "]
    for text in samples:
        for _ in range(40):
            f, out, i = AnswerFilter(), "", 0
            while i < len(text):
                n = rng.randint(1, 5)
                out += f.feed(text[i:i + n])
                i += n
            out += f.finish()
            assert out == clean_answer(text), (text, out)


def test_finished_runs_kept_in_memory_are_bounded(tmp_path):
    from _server_kit import config, sim_pool
    from openconductor.records import Run
    from openconductor.server.runs import Runtime

    cfg = config(tmp_path, {"m": {"version": "1", "pool": sim_pool(tmp_path), "policy": "moa"}}, server={"live_runs_kept": 2})
    runtime = Runtime(cfg)
    runs = [Run(question=f"q{i}", policy="moa") for i in range(4)]
    for run in runs:
        runtime.track(run)
    assert len(runtime.running) == 4
    for run in runs[:3]:
        runtime.finished(run)
    assert list(runtime.running) == [runs[3].id] and list(runtime.recent) == [runs[1].id, runs[2].id]
    assert runtime.live(runs[3].id) is runs[3] and runtime.live(runs[0].id) is None
    runtime.store.close()
