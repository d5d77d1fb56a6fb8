"""The shipped conductor for SIMULATED pools (``builtin:sim-bucket``, issue 29): a real SmolLM2 with the shipped
adapter, on a pool it never saw profiled per subtopic, names workers by their place in the question's own subtopic
("graph#1"), and each step runs the worker so named; sampled as GRPO samples it, the grammar holds and a seed repeats
its samples; `conductor sim-pool` writes a pool file the way it reads them and `conductor eval` runs it from one."""

from __future__ import annotations

import json
import re

import pytest

from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.conductor.ranking import area_keys, binding, rank_aliases
from openconductor.pool import load_pool
from openconductor.conductor.checkpoint import checkpoint_path
from openconductor.conductor.manifest import read_manifest
from openconductor.sim.pools import generate_pool, pool_spec, pool_toml
from openconductor.sim.questions import SUBTOPIC_NAMES
from openconductor.sim.world_v3 import make_questions
from openconductor.evaluation.simulated import conductor_plans, trained_ranking

SHIPPED = ("builtin:sim-bucket",)


@pytest.mark.heavy
@pytest.mark.parametrize("shipped", SHIPPED)
def test_the_subtopic_conductor_names_places_in_the_questions_subtopic_and_runs_those_workers(shipped):
    assert trained_ranking(shipped) == "subtopic"
    spec = pool_spec(generate_pool(951, held_out=True), profile="subtopic")  # a held-out family, a seed no table uses
    names, aliases = binding(read_manifest(checkpoint_path(shipped)).prompt, spec)
    words = dict(aliases)
    assert len(words) == 16 * min(3, len(spec.workers)) and words == dict(rank_aliases(spec))
    questions = make_questions(8, 4242)
    plans, own = conductor_plans(shipped, spec, questions, batch_size=8)
    assert all(p is not None for p in plans) and all(t > 0 for t in own)
    keys = area_keys(list(SUBTOPIC_NAMES.values()))
    said = 0
    for q, plan in zip(questions, plans):
        line = plan.reasoning.split("\n")[0]
        places = re.findall(r"\b([a-z]+)#(\d)", line)
        said += len(places)
        assert {k for k, _ in places} <= {keys[SUBTOPIC_NAMES[q.subtopic]]}, (q.subtopic, line)
        named = [words[f"{k}#{n}"] for k, n in places]
        assert [s.worker for s in plan.steps][: len(named)] == named[: len(plan.steps)], line
    assert said >= len(questions)  # it picks by rank words, not by memorised names


@pytest.mark.parametrize("shipped", SHIPPED)
def test_sim_pool_writes_the_subtopic_profile_the_shipped_subtopic_conductor_reads(tmp_path, shipped):
    out = tmp_path / "p.toml"
    result = CliRunner().invoke(app, ["sim-pool", "--seed", "952", "--out", str(out), "--checkpoint", shipped])
    assert result.exit_code == 0, result.output
    assert out.read_text() == pool_toml(generate_pool(952), checkpoint=shipped, profile="subtopic")
    assert "graph algorithms" in load_pool(out).workers[0].profile


@pytest.mark.heavy
def test_sampling_the_shipped_conductor_as_grpo_does_gives_a_group_of_parsed_and_varied_plans():
    spec = pool_spec(generate_pool(951, held_out=True), profile="subtopic")
    question = make_questions(1, 4243)
    greedy, _ = conductor_plans(SHIPPED[0], spec, question * 2, batch_size=2)
    assert len({p.steps for p in greedy}) == 1  # greedy decoding repeats itself
    sampled, _ = conductor_plans(SHIPPED[0], spec, question * 6, batch_size=6, temperature=2.0, seed=7)
    assert all(p is not None for p in sampled)  # the grammar holds at any temperature
    assert len({(p.reasoning, p.steps) for p in sampled}) > 1
    again, _ = conductor_plans(SHIPPED[0], spec, question * 6, batch_size=6, temperature=2.0, seed=7)
    assert again == sampled  # a seed repeats its samples


@pytest.mark.heavy
def test_conductor_eval_runs_the_shipped_conductor_from_a_generated_pool_file(tmp_path):
    pool = tmp_path / "sim-952.toml"
    pool.write_text(pool_toml(generate_pool(952), checkpoint=SHIPPED[0], profile="subtopic"))
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, ["eval", "--task", "sim", "--pool", str(pool), "--limit", "3", "--policy", "conductor",
                                      "--out", str(out), "--conductor-engine", "transformers"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    names = {w.name for w in generate_pool(952).workers}
    assert len(rows) == 3 and all(r["policy"].endswith("sim-bucket") for r in rows)
    # Planned by the trained model (no fallback), with the pool's own workers, and run to an answer.
    assert all(r["status"] == "ok" and r["plan_fallback"] is None and r["conductor_tokens"] > 0 for r in rows), rows
    assert all(r["steps"] >= 1 and set(r["workers_used"]) <= names for r in rows), rows
