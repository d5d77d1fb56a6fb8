"""The shipped conductors that read each subtopic's ranking (``builtin:sim-subtopic`` and ``builtin:sim-bucket``,
issue 29, SIMULATED): a real SmolLM2 with the shipped adapter, on a pool it never saw profiled per subtopic, names
workers by their place in the question's own subtopic ("graph#1"), and each step runs the worker so named;
`conductor sim-pool` writes a pool file the way they read them."""

from __future__ import annotations

import re

import pytest

from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.conductor.ranking import area_keys, binding, rank_aliases
from openconductor.pool import load_pool
from openconductor.conductor.checkpoint import checkpoint_path, read_manifest
from openconductor.sim.pools import generate_pool, pool_spec, pool_toml
from openconductor.sim.questions import SUBTOPIC_NAMES
from openconductor.sim.world_v3 import make_questions
from openconductor.train.sim_eval import conductor_plans, trained_ranking

SHIPPED = ("builtin:sim-subtopic", "builtin:sim-bucket")


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
