import os
import subprocess
import sys

import pytest

from openconductor.budget import Limits
from openconductor.pool import PoolConfigError, load_default_pool, load_pool

GOOD = """
name = "p"
[[workers]]
name = "a"
provider = "simulated"
price_output_per_m = 1.0
[[workers]]
name = "b"
provider = "simulated"
price_output_per_m = 5.0
[conductor]
worker = "a"
"""


def write(tmp_path, text, name="pool.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_toml_and_yaml(tmp_path):
    spec = load_pool(write(tmp_path, GOOD))
    assert [w.name for w in spec.workers] == ["a", "b"]
    assert spec.strongest_index() == 1  # most expensive when none is declared
    yaml_spec = load_pool(write(tmp_path, "workers:\n  - {name: x, provider: openai, model: m, base_url: 'http://127.0.0.1:1/v1'}\n", "p.yaml"))
    assert yaml_spec.workers[0].base_url.startswith("http://127.0.0.1")


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("workers = []", "at least one worker"),
        ('[[workers]]\nname = "a"\nprovider = "nope"', "workers.0.provider"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\n[[workers]]\nname = "a"\nprovider = "simulated"', "repeated: a"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\n[conductor]\nworker = "zz"', "unknown worker 'zz'"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\ntemprature = 0.1', "temprature"),
        ("workers = [", "not valid TOML"),
    ],
)
def test_bad_pool_files_name_the_problem(tmp_path, text, fragment):
    with pytest.raises(PoolConfigError) as info:
        load_pool(write(tmp_path, text))
    assert fragment in str(info.value) and "pool.toml" in str(info.value)


def test_missing_pool_file(tmp_path):
    with pytest.raises(PoolConfigError, match="not found"):
        load_pool(tmp_path / "nope.toml")


def test_subset_renumbers_and_keeps_the_conductor_backend(tmp_path):
    spec = load_pool(write(tmp_path, GOOD))
    sub = spec.subset([1])
    assert [w.name for w in sub.workers] == ["b"]
    assert sub.conductor.worker is None and sub.conductor.backend.name == "a"


def test_limits_tightened_never_raise():
    ceiling = Limits(max_calls=5, max_tokens=1000, max_cost_usd=None, max_depth=1)
    asked = Limits(max_calls=50, max_tokens=200, max_cost_usd=0.5, max_depth=3)
    got = ceiling.tightened(asked)
    assert (got.max_calls, got.max_tokens, got.max_cost_usd, got.max_depth) == (5, 200, 0.5, 1)


def test_default_pool_is_packaged_and_valid():
    spec = load_default_pool()
    # Offline: local models plus the python tool; no remote API.
    assert {w.provider for w in spec.workers} == {"local_gguf", "python"}
    assert spec.conductor.backend is not None and spec.strongest == "qwen-coder"
    for name, workflow in spec.workflows.items():
        assert workflow.resolve(spec).steps, name


def run_cli(*args, tmp_path):
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "t.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "openconductor", *args], capture_output=True, text=True, timeout=120, env=env)


def test_cli_reports_bad_input_clearly(tmp_path):
    bad = run_cli("ask", "q", "--pool", str(tmp_path / "missing.toml"), tmp_path=tmp_path)
    assert bad.returncode == 2 and "pool file not found" in bad.stderr
    pool = write(tmp_path, GOOD)
    unknown = run_cli("ask", "q", "--pool", str(pool), "--policy", "oracle", tmp_path=tmp_path)
    assert unknown.returncode == 2 and "unknown policy 'oracle'" in unknown.stderr
    missing = run_cli("trace", "doesnotexist", tmp_path=tmp_path)
    assert missing.returncode == 2 and "no trace with id" in missing.stderr


def test_cli_json_on_a_simulated_pool(tmp_path):
    import json

    pool = write(tmp_path, GOOD)
    done = run_cli("ask", "q", "--pool", str(pool), "--policy", "moa", "--json", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["policy"] == "moa" and run["totals"]["calls"] == 3 and run["status"] == "ok"


def test_cli_live_view_piped_keeps_every_panel_on_its_own_lines(tmp_path):
    pool = write(tmp_path, GOOD)
    done = run_cli("ask", "q", "--pool", str(pool), "--policy", "moa", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    answer_top = next(i for i, line in enumerate(lines) if " final answer ─" in line)
    # The final-answer box starts a line of its own, right after the last step's closing border.
    assert lines[answer_top].startswith("╭") and lines[answer_top - 1].rstrip().endswith("╯"), lines[answer_top - 1:answer_top + 1]
    assert "step 2" in done.stdout and "calls" in done.stdout


def test_pool_workflows_name_workers_that_exist(tmp_path):
    text = GOOD + '\n[workflows.bad]\nsteps = [{ worker = "ghost", subtask = "x" }]\n'
    with pytest.raises(PoolConfigError, match=r"workflows.bad: unknown worker\(s\) ghost"):
        load_pool(write(tmp_path, text))
    text = GOOD + '\n[workflows.forward]\nsteps = [{ worker = "a", subtask = "x", access = [1] }, { worker = "a", subtask = "y" }]\n'
    with pytest.raises(PoolConfigError, match=r"step 0: access \[1\] may only name earlier steps"):
        load_pool(write(tmp_path, text))
