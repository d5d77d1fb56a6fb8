"""Generated SIMULATED pools (openconductor.sim.pools, `conductor sim-pool`): deterministic per seed, held-out families,
descriptions written from profiles, and ordinary pool files that run."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.executor import solve
from openconductor.policies import make_policy
from openconductor.pool import Pool, load_pool
from openconductor.sim.pools import FAMILIES, HELD_OUT, fresh_names, generate_pool, grade, pool_spec, pool_toml, renamed
from openconductor.sim.world_v3 import Profile, make_questions


def test_the_same_seed_writes_the_same_pool_and_another_seed_another():
    assert pool_toml(generate_pool(17)) == pool_toml(generate_pool(17))
    assert pool_toml(generate_pool(17, held_out=True)) == pool_toml(generate_pool(17, held_out=True))
    assert pool_toml(generate_pool(17)) != pool_toml(generate_pool(18))


def test_training_pools_never_hold_a_held_out_family_and_held_out_pools_always_do():
    train = [generate_pool(s) for s in range(60)]
    held = [generate_pool(s, held_out=True) for s in range(60)]
    assert not any(HELD_OUT & set(p.families) for p in train)
    assert all(HELD_OUT & set(p.families) for p in held)
    assert {len(p.workers) for p in train + held} <= set(range(3, 9)) and {3, 8} <= {len(p.workers) for p in train + held}
    assert set(FAMILIES) - HELD_OUT <= {f for p in train for f in p.families}


def test_descriptions_are_written_from_the_profile_in_varied_wording():
    workers = [w for s in range(40) for w in generate_pool(s, held_out=True).workers]
    for w in workers:
        for domain, word in (("math", "math"), ("mmlu", "knowledge"), ("lcb", "coding")):
            assert f"{word}: {grade(domain, w.skills[domain])}" in w.description or \
                f"{grade(domain, w.skills[domain])} at {word}" in w.description or \
                f"{word} {grade(domain, w.skills[domain])}" in w.description, (w.name, w.description)
        if w.context is not None:
            assert f"reads at most {w.context:,} words" in w.description
    assert len({w.description.split(".")[0] for w in workers}) > 10  # openings vary
    # Two workers of one family with the same profile facts are not described by one fixed sentence.
    math = [w for w in workers if w.family == "math"]
    assert len({w.description.split(" (")[0] for w in math}) == len(math)


def test_a_written_pool_file_loads_and_its_workers_answer_as_their_profiles_say(tmp_path):
    path = tmp_path / "pool.toml"
    path.write_text(pool_toml(generate_pool(5, held_out=True)))
    spec = load_pool(path)
    assert spec.conductor.show == "descriptions" and all(w.description for w in spec.workers)
    profiles = [Profile.from_spec(w) for w in spec.workers]
    questions = make_questions(48, seed=1)

    async def answers():
        async with Pool(spec) as pool:
            return [await solve(q.text, make_policy("single", worker=spec.workers[0].name), pool, seed=0) for q in questions]

    runs = asyncio.run(answers())
    assert all(r.status == "ok" for r in runs)
    from openconductor.sim import world_v3

    assert [r.final_answer.endswith(q.reference) for r, q in zip(runs, questions)] == [world_v3.solo_correct(q.text, profiles[0]) for q in questions]


def test_sim_pool_command_writes_the_pool_and_refuses_bad_sizes(tmp_path):
    out = tmp_path / "p.toml"
    result = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--held-out", "--checkpoint", "builtin:sim-bucket"])
    assert result.exit_code == 0, result.output
    assert out.read_text() == pool_toml(generate_pool(4, held_out=True), checkpoint="builtin:sim-bucket", profile="subtopic")
    bad = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--min-workers", "5", "--max-workers", "2"])
    assert bad.exit_code != 0 and "min_workers" in bad.output
    sub = tmp_path / "sub.toml"
    result = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(sub), "--profile", "subtopic"])
    assert result.exit_code == 0, result.output
    assert load_pool(sub).workers[0].profile.keys() >= {"algebra", "graph algorithms", "financial modelling"}
    bad = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(sub), "--profile", "bucket"])
    assert bad.exit_code != 0 and "area, subtopic" in bad.output


def test_a_pool_profiled_per_subtopic_shows_each_subtopics_ranking_and_its_rank_words_name_places_there():
    """``profile = "subtopic"``: 16 ranking lines, one per subtopic; the words "graph#1", "number#2" name the places of
    ``subtopic_ranking`` (the rank lookup's), and the area ranking (the other lookup's) is the same as on the area file."""
    from openconductor.conductor.prompt import describe_pool
    from openconductor.conductor.ranking import area_keys, rank_aliases
    from openconductor.sim.pools import area_ranking, subtopic_ranking, with_profile
    from openconductor.sim.questions import SUBTOPIC_NAMES

    pool = generate_pool(10_001)
    by_area, by_subtopic = pool_spec(pool), pool_spec(pool, profile="subtopic")
    lines = describe_pool(by_subtopic, "ranking").split("Measured accuracy alone, best first:\n")[1].splitlines()
    assert [line.split(":")[0] for line in lines] == list(SUBTOPIC_NAMES.values())
    keys = area_keys(list(SUBTOPIC_NAMES.values()))
    assert len(set(keys.values())) == 16 and keys["graph algorithms"] == "graph" and keys["number theory"] == "number"
    words = dict(rank_aliases(by_subtopic))
    for (_, subtopic), order in subtopic_ranking(by_area).items():
        assert [words[f"{keys[SUBTOPIC_NAMES[subtopic]]}#{k}"] for k in (1, 2, 3)] == order[:3]
    assert area_ranking(by_subtopic) == area_ranking(by_area)
    assert subtopic_ranking(by_subtopic) == subtopic_ranking(by_area)  # the file's numbers are the measurement
    # Where a file says otherwise, its numbers rank (as its prompt lines show them), not a fresh measurement.
    last = subtopic_ranking(by_area)[("lcb", "graphs")][-1]
    edited = by_subtopic.model_copy(update={"workers": [w.model_copy(update={"profile": {**w.profile, "graph algorithms": 1.0}}) if i == last else w
                                                        for i, w in enumerate(by_subtopic.workers)]})
    assert subtopic_ranking(edited)[("lcb", "graphs")][0] == last == dict(rank_aliases(edited))["graph#1"]
    assert with_profile(by_subtopic, "area") == by_area and with_profile(by_area, "subtopic") == by_subtopic
    with pytest.raises(ValueError, match="unknown profile 'bucket'"):
        pool_toml(pool, profile="bucket")


def test_the_sim_task_asks_v3_questions_graded_against_the_worlds_answers():
    from openconductor.tasks import grade, load_task

    task = load_task("sim", limit=24, seed=3)
    assert len(task) == 24 and {q.metadata["level"] for q in task.questions} == {"easy", "medium", "hard"}
    q = task.questions[0]
    assert grade(q, f"reasoning\nFinal answer: {q.reference}").correct
    assert not grade(q, "Final answer: nope").correct
    assert grade(q, "no final line").extracted is None


@pytest.mark.parametrize("bad", [{"min_workers": 0}, {"min_workers": 4, "max_workers": 3}])
def test_impossible_pool_sizes_are_a_clear_error(bad):
    with pytest.raises(ValueError, match="min_workers"):
        generate_pool(1, **bad)


def test_renamed_pools_keep_every_worker_but_its_name_and_the_names_are_fresh_and_distinct():
    import random

    spec = pool_spec(generate_pool(3))
    a, b = renamed(spec, random.Random(1)), renamed(spec, random.Random(1))
    assert a == b and a != renamed(spec, random.Random(2))
    for old, new in zip(spec.workers, a.workers):
        assert new.name != old.name and new.options == old.options and new.price_output_per_m == old.price_output_per_m
        assert old.name not in (new.description or "")
    assert spec.strongest and a.strongest == a.workers[spec.index(spec.strongest)].name
    names = fresh_names(200, random.Random(0))
    assert len({n.split("-")[0] for n in names}) == 200  # no name is another's first part


def test_a_profile_ranks_the_workers_per_area_by_measured_accuracy_and_the_pool_file_holds_it():
    from openconductor.conductor.prompt import describe_pool
    from openconductor.conductor.ranking import RANKED, ranking
    from openconductor.sim.pools import measured_profile

    pool = generate_pool(916, held_out=True)
    spec = pool_spec(pool)
    for w, drawn in zip(spec.workers, pool.workers):
        assert set(w.profile) == {"math", "knowledge", "quantitative reasoning", "coding"}
        assert w.profile == measured_profile(w)  # deterministic: the same measurement each time
        # measured, not declared: near the drawn accuracy (240 questions an area)
        assert abs(w.profile["math"] - drawn.skills["math"]) < 0.12 and abs(w.profile["coding"] - drawn.skills["lcb"]) < 0.12
    lines = ranking(spec)
    assert lines[0].startswith("Measured accuracy") and len(lines) == 5
    math = lines[1].removeprefix("math: ").split(", ")
    assert len(math) == RANKED and math[0].split(" ")[0] == max(spec.workers, key=lambda w: w.profile["math"]).name
    assert [int(x.split(" ")[1]) for x in math] == sorted((int(x.split(" ")[1]) for x in math), reverse=True)
    shown = describe_pool(spec, "profile")
    assert shown.startswith(describe_pool(spec, "descriptions")) and shown.endswith(lines[-1])
    # "ranking": the names and the same ranking, without the descriptions
    short = describe_pool(spec, "ranking")
    assert short == describe_pool(spec, "names") + "\n" + "\n".join(lines)
    assert not any(w.description in short for w in spec.workers) and len(short) < len(shown) / 2
    # a declared profile wins over the measurement; a worker of another provider without one is left out
    mixed = spec.model_copy(update={"workers": [spec.workers[0].model_copy(update={"profile": {"math": 0.99}}),
                                                spec.workers[1].model_copy(update={"provider": "local_gguf", "profile": {}})]})
    assert ranking(mixed) == ["Measured accuracy alone, best first:", f"math: {spec.workers[0].name} 99"]


@pytest.mark.parametrize("value", [84, -0.5, float("nan"), float("inf")])
def test_a_profile_outside_0_to_1_is_refused_with_a_clear_error(value):
    from pydantic import ValidationError

    from openconductor.pool import WorkerSpec

    with pytest.raises(ValidationError, match="accuracies from 0 to 1"):
        WorkerSpec(name="w", provider="simulated", profile={"math": value})


def test_a_rank_table_names_no_worker_so_a_reordered_and_renamed_pool_gets_the_same_workers():
    import random

    from openconductor.sim.plan_search import RANKS, candidate_plans
    from openconductor.sim.pools import area_ranking
    from openconductor.evaluation.simulated import rank_lookup_plans, rank_table

    specs = [pool_spec(generate_pool(10_000 + i)) for i in range(2)]
    questions = make_questions(96, 5_000)
    table = rank_table(specs, questions, "domain")
    assert set(table) == {"math", "mmlu", "rlpr", "lcb"} and all(s.plan in candidate_plans(RANKS) for s in table.values())
    assert all(max(step.worker for step in s.plan.steps) < RANKS and s.questions == 2 * 24 for s in table.values())
    unseen = pool_spec(generate_pool(905))
    ranking = area_ranking(unseen)
    math_scores = [w.profile["math"] for w in unseen.workers]
    assert [math_scores[i] for i in ranking["math"]] == sorted(math_scores, reverse=True)
    asked = make_questions(8, 1000)
    plans = rank_lookup_plans(unseen, asked, table, "domain")
    # Reordered and renamed, the pool gets the same workers (by what they are, not by id or name).
    shuffled = renamed(unseen.model_copy(update={"workers": unseen.workers[::-1]}), random.Random(0))
    again = rank_lookup_plans(shuffled, asked, table, "domain")
    n = len(unseen.workers)
    assert all([n - 1 - s.worker for s in b.steps] == [s.worker for s in a.steps] for a, b in zip(plans, again))
    assert all(a.steps[0].worker == ranking[q.domain][table[q.domain].plan.steps[0].worker] for a, q in zip(plans, asked))


def test_unseen_pools_alternate_held_out_families_and_score_each_baseline_on_every_question():
    from openconductor.sim.plan_search import SearchSettings
    from openconductor.evaluation.simulated import unseen_pools

    questions = make_questions(6, 1000)
    small = SearchSettings(screen=2, finalists=2, rank=2, top=1)
    pools = list(unseen_pools([901, 902, 903], questions, settings=small))
    assert [(p.seed, p.held_out) for p in pools] == [(901, False), (902, True), (903, False)]
    assert all(bool(HELD_OUT & set(p.pool.families)) == p.held_out for p in pools)
    for p in pools:
        assert len(p.search.correct) == len(p.router.correct) == len(p.moa.correct) == len(questions)
        assert p.moa.mean_tokens > p.router.mean_tokens  # eight calls against one
    assert [p.held_out for p in unseen_pools([901, 902], questions, held_out="all", settings=small)] == [True, True]


def test_the_subtopic_ranking_puts_a_subtopic_specialist_first_where_the_area_ranking_does_not():
    from openconductor.sim.plan_search import GROUPINGS, BUCKET, rank_search
    from openconductor.sim.pools import RANKINGS, area_ranking, subtopic_ranking
    from openconductor.evaluation.simulated import declared

    specs = [pool_spec(generate_pool(s)) for s in range(6)]
    for spec in specs:
        by_subtopic = subtopic_ranking(spec)
        assert len(by_subtopic) == 16 and all(sorted(order) == list(range(len(spec.workers))) for order in by_subtopic.values())
        assert subtopic_ranking(spec) == by_subtopic  # measured on fixed questions: the same every time
    assert any(order[0] != area_ranking(spec)[domain][0] for spec in specs for (domain, _), order in subtopic_ranking(spec).items())
    # A plan over ranks needs one ranking per group: a per-domain group mixes four subtopics' rankings.
    questions = make_questions(32, 3)
    with pytest.raises(ValueError, match="mixes rankings"):
        rank_search([(declared(s), subtopic_ranking(s)) for s in specs[:2]], questions, GROUPINGS["domain"], ranked_by=RANKINGS["subtopic"][1])
    assert set(rank_search([(declared(s), subtopic_ranking(s)) for s in specs[:2]], questions, GROUPINGS[BUCKET], ranked_by=RANKINGS["subtopic"][1]))


def test_sim_pool_writes_the_profile_its_checkpoint_was_copied_to_read(tmp_path):
    import json

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {"ranking": "subtopic"}}}))
    out = tmp_path / "p.toml"
    result = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--checkpoint", str(ckpt)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == pool_toml(generate_pool(4), checkpoint=str(ckpt), profile="subtopic")
    result = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--checkpoint", str(ckpt), "--profile", "area"])
    assert result.exit_code == 0 and out.read_text() == pool_toml(generate_pool(4), checkpoint=str(ckpt))
    (ckpt / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {"ranking": "bucket"}}}))
    bad = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--checkpoint", str(ckpt)])
    assert bad.exit_code != 0 and "ranking = 'bucket'" in bad.output


def test_a_larger_profile_is_a_finer_measurement_of_the_same_skills_and_replaces_the_files_numbers(tmp_path):
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.sim.pools import PROFILE_QUESTIONS, subtopic_profile, with_profile

    pool = generate_pool(10_001)
    spec = pool_spec(pool, profile="subtopic")
    fine = with_profile(spec, "subtopic", questions=4 * PROFILE_QUESTIONS)
    assert fine == with_profile(spec, "subtopic", questions=4 * PROFILE_QUESTIONS)  # deterministic per size
    assert with_profile(spec, "subtopic") == spec  # without a size, the file's own numbers stand
    assert fine != spec and [w.profile for w in fine.workers] == [subtopic_profile(w, 4 * PROFILE_QUESTIONS) for w in spec.workers]
    assert pool_spec(pool, profile="subtopic", profile_questions=4 * PROFILE_QUESTIONS) == fine
    with pytest.raises(ValueError, match="at least 48 questions"):
        with_profile(spec, "area", questions=47)
    out = tmp_path / "fine.toml"
    done = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(out), "--profile", "subtopic", "--profile-questions", "1920"])
    assert done.exit_code == 0, done.output
    assert "measured on 1920 questions" in out.read_text()
    bad = CliRunner().invoke(app, ["sim-pool", "--seed", "4", "--out", str(tmp_path / "bad.toml"), "--profile-questions", "10"])
    assert bad.exit_code != 0 and "at least 48 questions" in " ".join(bad.output.split())
    assert not (tmp_path / "bad.toml").exists()


def test_the_benchmarks_refuse_a_profile_size_with_a_usage_error_that_says_why(capsys):
    import argparse

    from openconductor.sim.pools import profile_size_arg

    ap = argparse.ArgumentParser()
    ap.add_argument("--profile-questions", type=profile_size_arg)
    assert ap.parse_args(["--profile-questions", "3840"]).profile_questions == 3840
    for bad, why in (("10", "at least 48 questions"), ("many", "'many' is not a whole number")):
        with pytest.raises(SystemExit):
            ap.parse_args(["--profile-questions", bad])
        assert why in capsys.readouterr().err


def test_a_profiled_worker_of_another_provider_takes_its_place_in_the_subtopic_ranking_as_the_prompt_shows_it():
    from openconductor.conductor.ranking import area_keys, rank_aliases
    from openconductor.pool import WorkerSpec
    from openconductor.sim.pools import subtopic_ranking
    from openconductor.sim.questions import SUBTOPIC_NAMES

    spec = pool_spec(generate_pool(10_001), profile="subtopic")
    outside = WorkerSpec(name="outside", provider="python", profile={name: 0.99 for name in SUBTOPIC_NAMES.values()})
    mixed = spec.model_copy(update={"workers": [*spec.workers, outside]})
    order, words, keys = subtopic_ranking(mixed), dict(rank_aliases(mixed)), area_keys(list(SUBTOPIC_NAMES.values()))
    new = len(spec.workers)
    for (_, subtopic), places in order.items():
        assert places[0] == new and places[1:] == subtopic_ranking(spec)[(_, subtopic)]  # first everywhere, the rest as before
        assert words[f"{keys[SUBTOPIC_NAMES[subtopic]]}#1"] == new  # the prompt's words name the same places
