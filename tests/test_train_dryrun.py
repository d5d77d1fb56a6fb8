"""`conductor train CONFIG --dry-run`: the target search's runs and worker calls, counted without calling a
worker, against what the search then really runs on a SIMULATED pool (responders that always answer alike)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openconductor.cache import ResponseCache
from openconductor.providers.simulated import RESPONDERS, register_responder
from openconductor.train.search import screening, warmup_targets
from openconductor.train.config import load_train_config
from openconductor.train.dry_run import plan_search

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def responders():
    register_responder("dry-42")(lambda spec, messages, rng: "Final answer: 42")
    register_responder("dry-7")(lambda spec, messages, rng: "Final answer: 7")
    yield
    RESPONDERS.pop("dry-42", None)
    RESPONDERS.pop("dry-7", None)


def _config(tmp_path: Path, search_settings: str):
    workers = "".join(f'[[workers]]\nname = "{name}"\nprovider = "simulated"\noptions = {{ world = "{world}" }}\n'
                      for name, world in [("a", "dry-7"), ("b", "dry-42"), ("c", "dry-7")])
    (tmp_path / "pool.toml").write_text(f'name = "dry"\n{workers}')
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is 40 + 2? ({d} #{i})", "reference": "42", "task": "numeric", "domain": d}) + "\n"
                            for i in range(16) for d in ("x", "y")))
    path = tmp_path / "train.toml"
    path.write_text(f'pool = "{tmp_path / "pool.toml"}"\n[prompt]\nmax_steps = 3\nexamples = false\n'
                    f'[data]\nkind = "jsonl"\npath = "{data}"\nn_train = 30\nn_eval = 0\n[reward]\nreplay = "{tmp_path / "replay.sqlite3"}"\n'
                    f'[warmup_sft]\nexamples = 16\ntargets_per_prompt = 4\n[search]\n{search_settings}\n')
    return load_train_config(path)


def _search_for_real(cfg, monkeypatch) -> int:
    """Runs the search on the simulated pool; returns how many workflow runs it graded."""
    from openconductor.pool import load_pool
    from openconductor.train.data import build_rows, load_items

    graded = []
    real_grade = screening.grade_pairs

    async def counting(grader, pairs):  # instrumentation: the real grader runs every pair
        graded.append(len(pairs))
        return await real_grade(grader, pairs)

    monkeypatch.setattr(screening, "grade_pairs", counting)
    spec = load_pool(cfg.pool_path)
    warmup_targets.select_targets(cfg, spec, build_rows(cfg, spec, load_items(cfg)))
    return sum(graded)


@pytest.mark.parametrize("settings", ['candidates = 24\nselection = "domain"\nquestions = 8\nscreen_rounds = 2\nsingle_worker_plans = true',
                                      "candidates = 6"], ids=["domain", "question"])
def test_the_dry_run_counts_the_runs_the_search_makes_and_bounds_its_calls(tmp_path, responders, monkeypatch, settings):
    cfg = _config(tmp_path, settings)
    plan = plan_search(cfg)
    assert plan.exact and plan.runs > 0 and sum(plan.per_domain.values()) == plan.runs
    assert not (tmp_path / "replay.sqlite3").exists()  # nothing ran
    runs = _search_for_real(cfg, monkeypatch)
    assert runs == plan.runs
    # Every call the search made is one entry of the replay store; the dry run's count bounds them, and is
    # exact up to later steps that repeat (deterministic responders answer a repeated context alike).
    spent = len(ResponseCache(tmp_path / "replay.sqlite3", match="context"))
    assert 0.75 * plan.calls <= spent <= plan.calls
    assert plan.calls == sum(plan.per_worker.values()) and plan.replayed_first_steps > 0


def test_rank_rounds_make_the_count_an_estimate_and_no_search_counts_nothing(tmp_path, responders):
    assert not plan_search(_config(tmp_path, 'candidates = 24\nselection = "domain"\nquestions = 4\nrank_rounds = 2')).exact
    assert plan_search(_config(tmp_path, "")).runs == 0


def test_the_cli_prints_the_plan_without_calling_a_model(tmp_path):
    """The shipped conductor's recipe, counted in a subprocess: no worker runs and no model loads."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "openconductor", "train", str(ROOT / "examples" / "train_local_tools.toml"), "--dry-run",
                           "--set", f"reward.replay={tmp_path / 'r.sqlite3'}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "workflow runs" in out and "worker calls on an empty replay store" in out and "humaneval" in out
    assert not (tmp_path / "r.sqlite3").exists()
