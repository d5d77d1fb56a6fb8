import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from openconductor.budget import Limits
from openconductor.executor import solve
from openconductor.policies import make_policy
from openconductor.pool import Pool, PoolConfigError, PoolSpec, WorkerSpec, check_pool, load_default_pool, load_pool, missing_requirements

ROOT = Path(__file__).resolve().parents[1]

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
        ('[[workers]]\nname = "a"\nprovider = "nope"', "worker 'a' (workers.0.provider): no provider named 'nope'; known: anthropic"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\n[[workers]]\nname = "a"\nprovider = "simulated"', "repeated: a"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\n[conductor]\nworker = "zz"', "unknown worker 'zz'"),
        ('[[workers]]\nname = "a"\nprovider = "simulated"\ntemprature = 0.1', "temprature"),
        ("workers = [", "not valid TOML"),
        ('[[workers]]\nname = "a\\nb"\nprovider = "simulated"', "one line of printable text"),
        ('[[workers]]\nname = " a"\nprovider = "simulated"', "without leading or trailing spaces"),
        ('[[workers]]\nname = ""\nprovider = "simulated"', "one line of printable text"),
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
    unknown = run_cli("ask", "q", "--pool", str(pool), "--policy", "delphi", tmp_path=tmp_path)
    assert unknown.returncode == 2 and "unknown policy 'delphi'" in unknown.stderr
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


# ----------------------------------------------------------------------------- views of a live pool


async def test_view_shares_live_workers_renumbers_and_keeps_its_conductor_backend(tmp_path):
    spec = load_pool(write(tmp_path, GOOD))  # conductor.worker = "a"
    async with Pool(spec) as pool:
        view = pool.view([1])
        assert view.names == ["b"] and view[0] is pool[1]  # the same Worker: one semaphore, one client
        assert view.conductor_backend() is pool[0]  # "a" is not in the view, yet still plans for it
        assert pool.view([1, 0]).conductor_backend() is pool[0]
        await view.aclose()  # a view closes nothing of its parent's
    backend = GOOD.replace('worker = "a"', 'backend = { name = "planner", provider = "simulated" }')
    async with Pool(load_pool(write(tmp_path, backend))) as pool:
        assert pool.view([0]).conductor_backend() is pool.conductor_backend()


async def test_solve_on_a_view_runs_the_renumbered_worker(tmp_path):
    async with Pool(load_pool(write(tmp_path, GOOD))) as pool:
        run = await solve("q", make_policy("single", worker=0), pool.view([1]))
    assert run.status == "ok" and run.workers == ["b"] and run.steps[0].worker_name == "b"


# ------------------------------------------------------------------------------------------ fallback


@pytest.mark.parametrize(
    "fallback, fragment",
    [("strongest_", 'fallback must be "strongest", "none" or "worker:<name>"'), ("worker:", "fallback must be"),
     ("worker:zz", "conductor.fallback: unknown worker 'zz'"), ("worker:me", "is the conductor itself")],
)
def test_a_fallback_typo_is_an_error_not_the_strongest_worker(tmp_path, fallback, fragment):
    text = GOOD + f'fallback = "{fallback}"\n[[workers]]\nname = "me"\nprovider = "conductor"\n'
    with pytest.raises(PoolConfigError, match=re.escape(fragment)):
        load_pool(write(tmp_path, text))


def test_fallback_forms_that_are_allowed_and_a_subset_without_the_named_worker(tmp_path):
    for fallback in ("strongest", "none", "worker:a"):
        assert load_pool(write(tmp_path, GOOD + f'fallback = "{fallback}"\n')).conductor.fallback == fallback
    spec = load_pool(write(tmp_path, GOOD + 'fallback = "worker:a"\n'))
    assert spec.subset([1]).conductor.fallback == "strongest"  # the named worker is not shown: no dangling name
    assert spec.subset([0, 1]).conductor.fallback_worker == "a"


# ------------------------------------------------------------------------------ per-provider options


def test_unknown_or_bad_options_name_the_file_worker_and_field(tmp_path):
    text = ('[[workers]]\nname = "tiny"\nprovider = "local_gguf"\nmodel = "smollm2-135m-instruct"\n'
            "options = { n_ctxx = 2048, threads = 0 }\n")
    with pytest.raises(PoolConfigError) as info:
        load_pool(write(tmp_path, text))
    message = str(info.value)
    assert "pool.toml: worker 'tiny' (workers.0.options)" in message
    assert "n_ctxx: Extra inputs are not permitted" in message and "threads: Input should be greater than or equal to 1" in message
    assert "provider 'local_gguf' takes options: n_ctx, threads, threads_batch, chat, path, shared" in message


@pytest.mark.parametrize(
    "provider, options, fragment",
    [("openai", '{ grammer = true }', "grammer"), ("anthropic", '{ stop_sequences = "x" }', "stop_sequences"),
     ("gemini", '{ thinking_budget = "lots" }', "thinking_budget"), ("transformers", '{ dtype = "fp8" }', "dtype"),
     ("simulated", '{ latency = 1 }', "unknown option(s) latency"), ("simulated", '{ failure = "boom" }', "failure"),
     ("conductor", '{ x = 1 }', "takes options: none")],
)
def test_every_provider_checks_its_options(tmp_path, provider, options, fragment):
    text = f'[[workers]]\nname = "w"\nprovider = "{provider}"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\noptions = {options}\n'
    with pytest.raises(PoolConfigError, match=re.escape(fragment)):
        load_pool(write(tmp_path, text))


def test_options_a_world_reads_are_allowed_only_with_a_world():
    spec = WorkerSpec(name="w", provider="simulated", options={"world": "w", "skills": {"math": 0.5}})
    assert spec.options["skills"] == {"math": 0.5}
    with pytest.raises(ValueError, match="no world is set"):
        WorkerSpec(name="w", provider="simulated", options={"skills": {"math": 0.5}})


def test_every_example_pool_loads():
    pools = sorted((ROOT / "examples" / "pools").glob("*.toml"))
    assert len(pools) >= 10
    for path in pools:
        load_pool(path)


# ------------------------------------------------------------------------ keys and SDKs, at load time

REMOTE = """
name = "remote"
[[workers]]
name = "gpt"
provider = "openai"
model = "gpt-4o-mini"
[[workers]]
name = "gpt-big"
provider = "openai"
model = "gpt-4o"
[[workers]]
name = "claude"
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "OC_TEST_CLAUDE_KEY"
[[workers]]
name = "local"
provider = "openai"
model = "qwen"
base_url = "http://localhost:11434/v1"
[conductor]
backend = { name = "planner", provider = "gemini", model = "gemini-2.5-flash" }
"""


def test_missing_keys_are_one_message_naming_each_variable_and_its_workers(tmp_path, monkeypatch):
    for env in ("OPENAI_API_KEY", "OC_TEST_CLAUDE_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    spec = load_pool(write(tmp_path, REMOTE))  # loading the file is fine: the keys are needed to run it
    with pytest.raises(PoolConfigError) as info:
        Pool(spec)
    message = str(info.value)
    assert message.startswith("pool 'remote' cannot run here: API key variable(s) not set: ")
    assert "OPENAI_API_KEY (workers 'gpt', 'gpt-big')" in message
    assert "OC_TEST_CLAUDE_KEY (worker 'claude')" in message  # the worker's own api_key_env replaces the default
    assert "GEMINI_API_KEY or GOOGLE_API_KEY (worker 'planner')" in message  # the conductor backend counts
    assert "'local'" not in message  # a custom endpoint may be keyless
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OC_TEST_CLAUDE_KEY", "k")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    check_pool(spec)


def test_a_missing_sdk_names_the_extra_to_install(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "anthropic" else real(name, *a))
    monkeypatch.setenv("OC_TEST_CLAUDE_KEY", "k")
    spec = PoolSpec(name="p", workers=[WorkerSpec(name="claude", provider="anthropic", api_key_env="OC_TEST_CLAUDE_KEY")])
    with pytest.raises(PoolConfigError, match=re.escape("not installed: anthropic for worker 'claude': pip install 'openconductor[anthropic]'")):
        check_pool(spec)


def test_the_offline_local_pool_needs_no_key():
    assert missing_requirements(load_default_pool()) == []


# --------------------------------------------------------------------------------------------- limits


@pytest.mark.parametrize("field, value", [("max_calls", 0), ("max_calls", -1), ("max_tokens", 0), ("max_cost_usd", 0.0), ("max_depth", -1)])
def test_limits_reject_zero_and_negative_ceilings(field, value):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})
    assert Limits(max_depth=0).max_depth == 0  # no recursive round is a real setting


# ------------------------------------------------------------------------------------ config files


@pytest.mark.parametrize("text", ["- just\n- a list\n", "plain text\n"])
def test_a_yaml_file_that_is_not_a_table_names_the_file(tmp_path, text):
    with pytest.raises(PoolConfigError, match=r"p\.yaml: expected a table of settings"):
        load_pool(write(tmp_path, text, "p.yaml"))


def test_the_three_config_loaders_share_one_reader(tmp_path):
    from openconductor.server.config import ServerConfigError, load_server_config
    from openconductor.train.config import TrainConfigError, load_train_config

    bad = write(tmp_path, "x = [", "bad.toml")
    for load, error in ((load_pool, PoolConfigError), (load_train_config, TrainConfigError), (load_server_config, ServerConfigError)):
        with pytest.raises(error, match=r"bad\.toml: not valid TOML"):
            load(bad)
        with pytest.raises(error, match="not found: .*nope.toml"):
            load(tmp_path / "nope.toml")
