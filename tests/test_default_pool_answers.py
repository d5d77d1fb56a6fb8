"""The offline default pool, real models and the trained conductor (which plans "Qwen writes a program, the
python tool runs it" for arithmetic): README command 1 answers without bubblewrap, and a request for a JSON
format ends in a model step that writes it (issue 32)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from _server_kit import KEY, config, serve

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]


def path_without(tmp_path: Path, program: str) -> str:
    """A PATH with every program of this one except ``program`` (symlinks in one folder)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for entry in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if entry.name != program and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return str(folder)


def test_readme_command_1_answers_without_bubblewrap_and_says_so_once(tmp_path):
    env = dict(os.environ, PATH=path_without(tmp_path, "bwrap"), OPENCONDUCTOR_TRACES=str(tmp_path / "t.sqlite3"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), *sys.path]))
    done = subprocess.run([sys.executable, "-m", "openconductor", "ask", "--json", "--seed", "0"], capture_output=True, text=True,
                          env=env, timeout=550, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["status"] == "ok" and "60" in run["final_answer"]  # the sample question: 120 km in 2 hours
    assert len(run["warnings"]) == 1 and "worker 'python' cannot run on this machine" in run["warnings"][0]
    assert "`bwrap` is not on PATH" in run["warnings"][0] and "apt-get install -y bubblewrap" in run["warnings"][0]
    assert done.stderr.count("cannot run on this machine") == 1  # said once, at load
    python = [s for s in run["steps"] if s["worker_name"] == "python"]
    assert all(s["error_code"] == "worker_unavailable" for s in python)
    assert run["steps"][-1]["worker_name"] != "python" and run["steps"][-1]["status"] == "ok"


def test_a_json_schema_request_on_the_default_pool_ends_in_a_model_step(tmp_path):
    cfg = config(tmp_path, {"local": {"version": "v1", "pool": "default", "policy": "conductor"}})
    schema = {"type": "object", "properties": {"answer": {"type": "number"}}, "required": ["answer"]}
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, timeout=500, max_retries=0)
        # Worded as the conductor's arithmetic training questions, so that it plans (an unfamiliar wording, such as
        # "What is 17 * 23?", runs the pool's code-run-answer instead, which ends in a model step of its own).
        reply = c.chat.completions.create(model="local", messages=[{"role": "user", "content": "Calculate 17 * 23."}], seed=0,
                                          response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
        run = httpx.get(f"{url}/v1/traces/{reply.model_extra['conductor']['trace_id']}", headers={"Authorization": f"Bearer {KEY}"}).json()
    planned = run["plan"]["workflow"]["steps"]
    assert run["workers"][planned[-1]["worker"]] == "python"  # the conductor's plan ended in the tool (the defect's case)
    assert [s["worker_name"] for s in run["steps"]][-1] == "qwen-coder" and run["steps"][-1]["appended"]
    assert isinstance(json.loads(reply.choices[0].message.content)["answer"], (int, float))
