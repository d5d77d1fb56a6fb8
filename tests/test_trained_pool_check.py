"""A trained conductor is never applied to a pool by stale ids: one trained on ordinal ids is refused on a pool
whose workers differ; one trained on descriptions plans for any pool, prompted by descriptions."""

from __future__ import annotations

import json

import pytest

from openconductor.pool import PoolConfigError, load_pool
from openconductor.conductor.checkpoint import MANIFEST, trained_conductor
from openconductor.sim.pools import generate_pool, pool_toml

PAPER = "examples/pools/simulated_paper.toml"


def _checkpoint(tmp_path, **manifest):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / MANIFEST).write_text(json.dumps({"format": "openconductor-conductor/1", "kind": "full", "gguf": None, **manifest}))
    return ckpt


def _pool(tmp_path, seed: int):
    path = tmp_path / f"sim-{seed}.toml"
    path.write_text(pool_toml(generate_pool(seed)))
    return load_pool(path)


def test_an_ids_conductor_is_refused_on_a_pool_with_other_workers(tmp_path):
    trained_on = load_pool(PAPER)
    ckpt = _checkpoint(tmp_path, prompt={"show": "ids", "max_steps": 5}, pool={"name": trained_on.name, "workers": [w.name for w in trained_on.workers]})
    other = _pool(tmp_path, 3)
    with pytest.raises(PoolConfigError, match=r"trained on ordinal ids .*gemma-3-27b-it.*ids would name other workers.*descriptions"):
        trained_conductor(other, ckpt, engine="transformers")
    # The same pool, or the same workers in the same order, is fine.
    spec, _ = trained_conductor(trained_on, ckpt, engine="transformers")
    assert spec.conductor.checkpoint == str(ckpt.resolve())


def test_the_same_workers_in_another_order_are_refused_too(tmp_path):
    trained_on = load_pool(PAPER)
    ckpt = _checkpoint(tmp_path, prompt={"show": "ids"}, pool={"name": trained_on.name, "workers": [w.name for w in trained_on.workers]})
    shuffled = trained_on.subset(list(reversed(range(len(trained_on.workers)))))
    with pytest.raises(PoolConfigError, match="ids would name other workers"):
        trained_conductor(shuffled, ckpt, engine="transformers")


def test_an_older_manifest_is_checked_against_the_pool_file_it_names(tmp_path):
    ckpt = _checkpoint(tmp_path, prompt={"show": "ids"}, pool=PAPER)
    with pytest.raises(PoolConfigError, match="ids would name other workers"):
        trained_conductor(_pool(tmp_path, 4), ckpt, engine="transformers")


def test_a_descriptions_conductor_plans_for_any_pool_by_description(tmp_path):
    ckpt = _checkpoint(tmp_path, prompt={"show": "descriptions", "max_steps": 3, "fine_grained": False}, pool={"name": "two", "workers": ["a", "b"]})
    other = _pool(tmp_path, 5).model_copy(update={"conductor": _pool(tmp_path, 6).conductor.model_copy(update={"show": "ids"})})
    spec, _ = trained_conductor(other, ckpt, engine="transformers")
    assert spec.conductor.show == "descriptions" and spec.conductor.max_steps == 3


@pytest.mark.parametrize("show", ["profile", "ranking"])
def test_a_ranking_conductor_is_refused_where_nothing_is_measured_and_warns_where_some_are(tmp_path, caplog, show):
    ckpt = _checkpoint(tmp_path, prompt={"show": show, "max_steps": 3}, pool={"name": "sim", "workers": ["a", "b"]})
    unmeasured = load_pool("examples/pools/openai.toml")
    with pytest.raises(PoolConfigError, match=rf"measured accuracy per area \(show = \"{show}\"\).*no worker of pool 'openai' has a profile"):
        trained_conductor(unmeasured, ckpt, engine="transformers")
    one = unmeasured.model_copy(update={"workers": [unmeasured.workers[0].model_copy(update={"profile": {"math": 0.7}}), *unmeasured.workers[1:]]})
    with caplog.at_level("WARNING"):
        spec, _ = trained_conductor(one, ckpt, engine="transformers")
    assert spec.conductor.show == show and caplog.text.rstrip().endswith("left out of it: gpt-4o")
    # Simulated workers are measured in their world: no profile needed in the file.
    trained_conductor(_pool(tmp_path, 5), ckpt, engine="transformers")


def test_a_conductor_copied_on_subtopic_rankings_warns_on_a_pool_ranked_per_area(tmp_path, caplog):
    """Its rank words ("graph#1") bind only where the pool's profile ranks subtopics: elsewhere it is warned about, with
    how to profile the pool; on a pool profiled per subtopic, and for a conductor copied on areas, nothing is said."""
    ckpt = _checkpoint(tmp_path, prompt={"show": "ranking", "max_steps": 3, "rank_aliases": True}, pool={"name": "sim", "workers": ["a"]},
                       copy={"settings": {"ranking": "subtopic"}})
    by_area = _pool(tmp_path, 5)
    with caplog.at_level("WARNING"):
        trained_conductor(by_area, ckpt, engine="transformers")
    assert "one ranking line per subtopic" in caplog.text and "--profile subtopic" in caplog.text
    caplog.clear()
    path = tmp_path / "sub.toml"
    path.write_text(pool_toml(generate_pool(5), profile="subtopic"))
    with caplog.at_level("WARNING"):
        trained_conductor(load_pool(path), ckpt, engine="transformers")
        (tmp_path / "area").mkdir()
        trained_conductor(by_area, _checkpoint(tmp_path / "area", prompt={"show": "ranking", "max_steps": 3}), engine="transformers")
    assert "subtopic" not in caplog.text
