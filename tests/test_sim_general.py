"""The general conductor's pieces (SIMULATED world v3): the plan search, the shared-prefix supervised copy,
and search-and-copy targets across generated pools. No model download: a tiny random Llama where one is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openconductor.pool import load_pool
from openconductor.sim.plan_search import SearchSettings, candidate_plans, search_group
from openconductor.sim.pools import generate_pool, pool_spec
from openconductor.sim.questions import SUBTOPICS
from openconductor.sim.world_v3 import Profile, make_questions
from openconductor.workflow import parse

from train_helpers import TINY_LLAMA, tiny_tokenizer

POOL = "examples/pools/simulated_paper_v3.toml"


def test_candidate_plans_cover_five_shapes_over_every_worker():
    assert len(candidate_plans(6)) == 6 + 36 + 36 + 216 + 15 * 6
    assert len(candidate_plans(8)) == 872


def test_the_search_finds_the_subtopic_specialist_and_prefers_one_step_when_it_is_as_good():
    spec = load_pool(POOL)
    profiles = [Profile.from_spec(w) for w in spec.workers]
    # A worker certain on geometry: alone it is right every time and cheapest, so nothing beats it.
    sure = Profile(name="geo-oracle", skills={"math": 0.5}, subtopics={f"math.{s}": (3.0 if s == "geometry" else -3.0) for s in SUBTOPICS["math"]})
    pool = profiles + [sure]
    qs = [q for q in make_questions(4000, seed=2, domains=("math",)) if q.bucket == ("math", "geometry", "medium")]
    best = search_group(pool, qs, SearchSettings(screen=16, rank=24, top=3))
    assert [s.worker for s in best[0].plan.steps] == [len(pool) - 1] and best[0].accuracy == 1.0
    assert len(best) == 3 and best[0].score >= best[1].score >= best[2].score



def test_the_shared_prefix_loss_equals_each_row_alone(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from openconductor.train.supervised_copy import batch_loss

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer(tmp_path / "tok"))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA))
    system = {"role": "system", "content": "system the task one agent model id " * 5}
    prompts = [[system, {"role": "user", "content": text}] for text in ("the task", "the answer one agent", "check")]
    targets = ["Reasoning: one agent answers.", "the answer", "model id check the task"]
    together = batch_loss(model, tok, prompts, targets)
    # Each row alone, weighted by its target tokens, gives the same mean.
    sizes = [len(tok(t + tok.eos_token, add_special_tokens=False)["input_ids"]) for t in targets]
    alone = sum(float(batch_loss(model, tok, [p], [t]).detach()) * n for p, t, n in zip(prompts, targets, sizes)) / sum(sizes)
    assert float(together) == pytest.approx(alone, rel=1e-5)
    together.backward()
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in model.parameters())


def test_copy_targets_name_the_bucket_and_the_workers_and_parse(tmp_path):
    from pathlib import Path

    from openconductor.train.sim_general_search import CopySettings, PromptShape, build

    settings = CopySettings(pools=1, per_pool=6, training_pool_examples=6, search=SearchSettings(screen=4, rank=4, top=1))
    data = build(settings, Path(POOL), PromptShape())
    assert [len(p) for p, _ in data.groups] == [6, 6]
    spec = pool_spec(generate_pool(settings.pool_seed))
    prompts, targets = data.groups[1]
    assert "Model id 0: " + spec.workers[0].name + " — " in prompts[0][0]["content"]
    for row, text in zip(data.rows[6:], targets):
        plan = parse(text)
        level, subtopic = row["bucket"][2], row["bucket"][1]
        assert text.startswith(f"Reasoning: {level} ") and len(plan.reasoning) <= len("Reasoning: ") + 80
        named = plan.reasoning.split(": ", 2)[-1] if plan.reasoning.count(": ") == 2 else ""
        # Every step's worker by name, in order, unless the names do not fit the grammar's 80 characters.
        assert named == "" or [spec.workers[s.worker].name for s in plan.steps] == [part.split(" ")[-1] for part in named.split(", ")]
        assert subtopic.split("_")[0][:4] in plan.reasoning or subtopic == "dp"


def test_grpo_rows_run_each_question_on_its_own_pool_inside_one_union_pool():
    from openconductor.sim.world import Traits
    from openconductor.sim.world_v3 import solo_correct
    from openconductor.train.config import load_train_config
    from openconductor.train.sim_general import grpo_rows, union_pool
    from openconductor.train.sim_general_search import CopySettings, training_pools

    cfg = load_train_config("examples/train_sim_general.toml", {"data.rename_workers": False})
    pools = training_pools(CopySettings(pools=3), cfg.pool_path)
    union, indices = union_pool(pools)
    assert len({w.name for w in union.workers}) == len(union.workers) == sum(len(p.workers) for p in pools)
    rows = grpo_rows(cfg, pools, indices, 6, seed=1, exclude=frozenset())
    assert len(rows) == 6 * len(pools) and rows[0].workers != rows[1].workers  # pools in rotation
    for row in rows:
        spec = pools[indices.index(row.workers)]
        # The same worker: a name taken twice is renamed, but the world draws its luck from its own name.
        assert [Traits.from_spec(union.workers[i]) == Traits.from_spec(w) for i, w in zip(row.workers, spec.workers)] == [True] * len(spec.workers)
        assert f"Model id 0: {spec.workers[0].name} — " in row.prompt[0]["content"]
        assert not all(solo_correct(row.question, Profile.from_spec(w)) for w in spec.workers)
    assert any("~" in w.name for w in union.workers)  # some name was taken twice (the check above is not empty)


@pytest.mark.heavy
def test_renamed_workers_show_fresh_names_in_prompts_targets_and_grpo_rows_but_run_the_same_workers():
    from pathlib import Path

    from openconductor.train.config import load_train_config
    from openconductor.train.sim_general import grpo_rows, union_pool
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build, training_pools
    from openconductor.workflow import named_workers

    settings = CopySettings(pools=2, per_pool=6, training_pool_examples=4, search=SearchSettings(screen=4, rank=4, top=1))
    plain, fresh = build(settings, Path(POOL), PromptShape()), build(settings, Path(POOL), PromptShape(rename_workers=True))
    assert fresh.groups[0] == plain.groups[0]  # the training pool keeps its names
    seen: set[tuple[str, ...]] = set()
    for g, searched in enumerate(fresh.searched[1:], 1):
        own = [w.name for w in searched.spec.workers]
        for prompt, target, best in zip(*fresh.groups[g], searched.best):
            listed = re.findall(r"Model id \d+: (\S+) — ", prompt[0]["content"])
            assert len(listed) == len(own) and not set(listed) & set(own)  # every worker renamed
            seen.add(tuple(listed))
            plan = parse(target)
            said = named_workers(plan.reasoning, listed)
            assert not said or list(said) == [s.worker for s in best.plan.steps]  # the target names the same workers, renamed
    assert len(seen) == sum(len(p) for p, _ in fresh.groups[1:])  # fresh names in every example
    again = build(settings, Path(POOL), PromptShape(rename_workers=True))
    assert again.groups == fresh.groups  # the same names on every load

    cfg = load_train_config("examples/train_sim_general.toml", {"data.rename_workers": True})
    pools = training_pools(CopySettings(pools=2), cfg.pool_path)
    union, indices = union_pool(pools)
    for row in grpo_rows(cfg, pools, indices, 4, seed=1, exclude=frozenset()):
        spec = pools[indices.index(row.workers)]
        listed = re.findall(r"Model id \d+: (\S+) — ", row.prompt[0]["content"])
        assert listed == list(row.names)  # the rollout binds ids to the names the prompt shows
        assert (listed == [w.name for w in spec.workers]) == (spec is pools[0])


def _tiny_copy_settings():
    from openconductor.train.sim_general_search import CopySettings

    return CopySettings(pools=1, per_pool=4, training_pool_examples=4, search=SearchSettings(screen=4, rank=4, top=1))


@pytest.fixture(scope="module")
def tiny_built():
    """The copy data of ``_tiny_copy_settings`` with the default prompt shape, searched once for the tests that read it."""
    from pathlib import Path

    from openconductor.train.sim_general import PromptShape, build

    return build(_tiny_copy_settings(), Path(POOL), PromptShape())


def test_copy_data_saved_by_the_search_loads_as_the_data_it_built(tmp_path, tiny_built):
    from pathlib import Path

    from openconductor.train import sim_general_search
    from openconductor.train.sim_general import PromptShape

    settings, shape, built = _tiny_copy_settings(), PromptShape(), tiny_built
    key = sim_general_search.data_key(settings, Path(POOL), test_n=10, eval_seed=1000)
    path = sim_general_search.save(built, tmp_path / sim_general_search.FILE_NAME, key)
    loaded = sim_general_search.load(path, key, Path(POOL), shape)
    assert len(loaded.groups) == 2 and [len(p) for p, _ in loaded.groups] == [4, 4]
    assert loaded.groups == built.groups and loaded.rows == built.rows and loaded.seconds == built.seconds
    assert [s.best for s in loaded.searched] == [s.best for s in built.searched]


def test_copy_data_names_every_question_its_conductor_was_trained_or_searched_on(tmp_path):
    """``sim_general_search.training_questions``: the examples' questions and both searches' (the generated pools' and the
    training pool's own, at its own size), so that a held-out set of another seed can be drawn without them."""
    import dataclasses
    from pathlib import Path

    from openconductor.sim.world_v3 import make_questions
    from openconductor.train import sim_general_search
    from openconductor.train.sim_general_search import PromptShape, build, held_out_texts, own_search, search_questions

    settings = dataclasses.replace(_tiny_copy_settings(), training_pool_search=(5, 5))
    exclude = held_out_texts(10, 1000)
    built = build(settings, Path(POOL), PromptShape(), exclude=exclude)
    key = sim_general_search.data_key(settings, Path(POOL), test_n=10, eval_seed=1000)
    texts = sim_general_search.training_questions(sim_general_search.save(built, tmp_path / sim_general_search.FILE_NAME, key))
    examples = {q.text for s in built.searched for q in s.questions}
    searched = {q.text for q in search_questions(settings, exclude)}
    own = {q.text for q in search_questions(settings, exclude, own_search(settings))}
    assert len(examples) == 8 and len(searched) == 48 * 8 and len(own) == 48 * 10
    assert texts == examples | searched | own and not texts & exclude
    assert {q.text for q in make_questions(48 * 8, settings.search_seed)} & texts  # a set drawn like the search's overlaps it...
    held = make_questions(48 * 8, settings.search_seed, exclude=texts)
    assert len(held) == 48 * 8 and not {q.text for q in held} & texts  # ...unless drawn without its questions


def test_copy_data_of_another_run_or_a_bad_file_is_refused_with_what_differs(tmp_path, tiny_built):
    from pathlib import Path

    from openconductor.train import sim_general_search
    from openconductor.train.sim_general import CopySettings, PromptShape

    settings, shape = _tiny_copy_settings(), PromptShape()
    key = sim_general_search.data_key(settings, Path(POOL), test_n=10, eval_seed=1000)
    path = sim_general_search.save(tiny_built, tmp_path / sim_general_search.FILE_NAME, key)
    other = sim_general_search.data_key(CopySettings(pools=1, per_pool=4, training_pool_examples=4, search=SearchSettings(screen=4, rank=6, top=1)),
                               Path(POOL), test_n=10, eval_seed=1000)
    with pytest.raises(sim_general_search.CopyDataError, match=r"copy.search.rank: 4 in the file != 6 in this run"):
        sim_general_search.load(path, other, Path(POOL), shape)
    with pytest.raises(sim_general_search.CopyDataError, match=r"eval_seed: 1000 in the file != 7 in this run"):
        sim_general_search.load(path, {**key, "eval_seed": 7}, Path(POOL), shape)
    # a setting a key leaves out (older files never recorded it) is at its default, and the message says so
    by_subtopic = sim_general_search.data_key(CopySettings(**{**settings.__dict__, "ranking": "subtopic"}), Path(POOL), test_n=10, eval_seed=1000)
    with pytest.raises(sim_general_search.CopyDataError, match=r"copy.ranking: its default in the file != 'subtopic' in this run"):
        sim_general_search.load(path, by_subtopic, Path(POOL), shape)
    with pytest.raises(sim_general_search.CopyDataError, match="not found"):
        sim_general_search.load(tmp_path / "missing.json.gz", key, Path(POOL), shape)
    (tmp_path / "bad.json.gz").write_text("not gzip")
    with pytest.raises(sim_general_search.CopyDataError, match="not a copy-data file"):
        sim_general_search.load(tmp_path / "bad.json.gz", key, Path(POOL), shape)


def test_copy_data_rebuilds_targets_with_the_loading_code(tmp_path, monkeypatch, caplog, tiny_built):
    from pathlib import Path

    from openconductor.train import sim_general_search
    from openconductor.train.sim_general import PromptShape

    settings, shape, built = _tiny_copy_settings(), PromptShape(), tiny_built
    key = sim_general_search.data_key(settings, Path(POOL), test_n=10, eval_seed=1000)
    path = sim_general_search.save(built, tmp_path / sim_general_search.FILE_NAME, key)
    # The target wording changes after the search: the loaded data uses the new wording (the plans are kept).
    monkeypatch.setattr(sim_general_search, "reasoning", lambda plan, spec, q, rank_aliases=False: f"Reasoning: {q.level} {q.subtopic}")
    loaded = sim_general_search.load(path, key, Path(POOL), shape)
    assert all(t.startswith("Reasoning: ") and ": " not in t.split("\n")[0][len("Reasoning: "):] for _, ts in loaded.groups for t in ts)
    assert [parse(t).steps for _, ts in loaded.groups for t in ts] == [parse(t).steps for _, ts in built.groups for t in ts]
    assert "8 of 8 examples' prompts or targets differ" in caplog.text


def test_the_copy_time_box_stops_after_the_step_that_passes_it(tmp_path):
    pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from openconductor.train.supervised_copy import SFTSettings, copy_targets

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer(tmp_path / "tok"))
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA))
    prompts = [[{"role": "system", "content": "the task one agent"}, {"role": "user", "content": f"check {i}"}] for i in range(4)]
    groups = [(prompts, ["the answer"] * 4)]
    settings = SFTSettings(epochs=2, learning_rate=1e-3, batch_size=1)
    assert len(copy_targets(model, tok, groups, settings.model_copy(update={"max_seconds": 0.0}))) == 1
    assert len(copy_targets(model, tok, groups, settings.model_copy(update={"max_seconds": 600.0}))) == 8
    assert len(copy_targets(model, tok, groups, settings.model_copy(update={"max_batches": 3}))) == 3


@pytest.mark.parametrize("args, message", [
    (["--stage", "search", "--copy-data", "x.json.gz"], "--copy-data is read by --stage copy or both"),
    (["--stage", "copy", "--copy-data", "missing.json.gz"], "no such file"),
    (["--copy-max-minutes", "0"], "--copy-max-minutes must be above 0"),
    (["--stage", "grpo", "--init", "builtin:sim-bucket"], "--init is read by --stage copy or both"),
    (["--stage", "copy", "--init", "no-such-run"], "no trained conductor there"),
    (["--token-weight", "-0.1"], "--token-weight must be 0 or more"),
    (["--stage", "grpo", "--token-weight", "0.03"], "GRPO's price is reward.token_weight"),
    (["--init", "builtin:no-such-conductor"], "--init: no built-in conductor"),
    (["--rank-questions", "0"], "--rank-questions must be at least 1"),
    (["--training-pool-token-weight", "-1"], "--training-pool-token-weight must be 0 or more"),
    (["--stage", "grpo", "--training-pool-token-weight", "0.01"], "prices the copy's targets; GRPO's price is reward.token_weight"),
    (["--targets", "ranks", "--training-pool-token-weight", "0.01"], "--targets ranks copies none"),
])
def test_the_cli_refuses_copy_data_it_cannot_use(args, message, capsys, tmp_path, monkeypatch):
    from openconductor.train.sim_general import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["config.toml", *args])
    assert message in capsys.readouterr().err


def test_the_copy_data_check_names_what_differs_from_the_issue_scale(tmp_path, capsys, tiny_built):
    from pathlib import Path

    from openconductor.train import sim_general_search

    settings = _tiny_copy_settings()
    path = sim_general_search.save(tiny_built, tmp_path / sim_general_search.FILE_NAME,
                          sim_general_search.data_key(settings, Path(POOL), test_n=1000, eval_seed=1000))
    with pytest.raises(SystemExit):
        sim_general_search.main(["examples/train_sim_general.toml", str(path)])
    assert "copy.per_pool: 4 in the file != 48 in this run" in capsys.readouterr().err


def test_a_general_conductor_over_generated_pools_refuses_a_pool_shown_by_ids_or_names():
    from openconductor.train.config import TrainConfigError, load_train_config
    from openconductor.train.sim_general_search import PromptShape

    for show in ("ids", "names"):
        cfg = load_train_config("examples/train_sim_general.toml", {"prompt.show": show, "prompt.ids_follow_names": False})
        with pytest.raises(TrainConfigError, match="descriptions"):
            PromptShape.of(cfg)
    assert PromptShape.of(load_train_config("examples/train_sim_general_profile.toml")).show == "profile"
    assert PromptShape.of(load_train_config("examples/train_sim_general_ranks.toml", {"prompt.show": "ranking"})).show == "ranking"


def test_rank_targets_give_every_pool_the_same_plan_over_ranks_per_bucket():
    """``targets = "ranks"``: the copy imitates the rank lookup, so a bucket's target, read back as places in the
    ranking of the question's area, is the same plan on every pool, however that pool numbers its workers."""
    from pathlib import Path

    from openconductor.sim.plan_search import BUCKET
    from openconductor.sim.pools import area_ranking
    from openconductor.evaluation.simulated import rank_lookup_plans
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build, rank_lookup_table

    settings = CopySettings(pools=3, per_pool=48, training_pool_examples=48, targets="ranks", rank_questions=1,
                            search=SearchSettings(screen=4, rank=4, top=1))
    data = build(settings, Path(POOL), PromptShape())
    over_ranks: dict = {}
    for searched in data.searched:
        ranking = area_ranking(searched.spec)
        for q, best in zip(searched.questions, searched.best):
            places = tuple((ranking[q.domain].index(s.worker), s.subtask, s.access) for s in best.plan.steps)
            over_ranks.setdefault(q.bucket, set()).add(places)
    shared = [b for b in over_ranks if sum(any(q.bucket == b for q in s.questions) for s in data.searched) > 1]
    assert shared and all(len(over_ranks[b]) == 1 for b in shared)
    # The benchmarks' rank lookup row is the very table the copy imitates.
    table = rank_lookup_table(Path(POOL), frozenset(), settings)
    for searched in data.searched:
        assert rank_lookup_plans(searched.spec, searched.questions, table, BUCKET) == [b.plan for b in searched.best]
    with pytest.raises(ValueError, match="search.*ranks"):
        CopySettings(targets="oracle")


def test_mixed_targets_copy_the_training_pools_own_search_and_the_rank_lookup_elsewhere():
    """``targets = "mixed"``: on the training pool (seen, so its own lookup is the bar there) each example's target
    is that pool's searched bucket plan, as with ``"search"``; on generated pools it is the rank lookup's, as with
    ``"ranks"``."""
    from pathlib import Path

    from openconductor.train.sim_general_search import CopySettings, PromptShape, build

    small = dict(pools=2, per_pool=48, training_pool_examples=48, rank_questions=1, search=SearchSettings(screen=4, rank=4, top=1))
    built = {t: build(CopySettings(targets=t, **small), Path(POOL), PromptShape()) for t in ("search", "ranks", "mixed")}
    plans = {t: [[b.plan for b in s.best] for s in d.searched] for t, d in built.items()}
    assert plans["mixed"][0] == plans["search"][0] and plans["mixed"][1:] == plans["ranks"][1:]
    assert plans["search"][0] != plans["ranks"][0]  # else the first check could not tell the two apart


def test_the_training_pools_own_plans_take_their_own_price_and_the_generated_pools_keep_theirs():
    """``training_pool_token_weight``: the training pool (seen, so its own per-bucket table is the bar there) is searched
    at its own price; the generated pools' rank-lookup targets stay at ``search.token_weight``; the copy data's key
    records the price only where one is given (data searched before the option loads as it did)."""
    from pathlib import Path

    from openconductor.train import sim_general_search
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build

    small = dict(targets="mixed", pools=1, per_pool=48, training_pool_examples=48, rank_questions=1)
    dear = SearchSettings(screen=4, rank=4, top=1, token_weight=0.2)
    both = build(CopySettings(search=dear, **small), Path(POOL), PromptShape())
    split = build(CopySettings(search=dear, training_pool_token_weight=0.0, **small), Path(POOL), PromptShape())
    free = build(CopySettings(search=SearchSettings(screen=4, rank=4, top=1, token_weight=0.0), **small), Path(POOL), PromptShape())
    plans = lambda d: [[b.plan for b in s.best] for s in d.searched]
    assert plans(split)[0] == plans(free)[0] and plans(split)[1:] == plans(both)[1:]
    assert plans(split)[0] != plans(both)[0]  # else the price could not be told from no price
    assert sum(b.tokens for b in split.searched[0].best) > sum(b.tokens for b in both.searched[0].best)
    key = lambda s: sim_general_search.data_key(s, Path(POOL), test_n=10, eval_seed=1000)["copy"]
    assert "training_pool_token_weight" not in key(CopySettings(**small))
    assert key(CopySettings(training_pool_token_weight=0.0, **small))["training_pool_token_weight"] == 0.0
    with pytest.raises(ValueError, match="0 or more"):
        CopySettings(training_pool_token_weight=-0.5)


def test_the_training_pools_own_plans_are_searched_on_their_own_questions_as_the_lookups_are():
    """``training_pool_search``: the training pool's own plans are its per-bucket table searched on the lookups' own
    questions at that size (``evaluation.simulated.lookup_search_questions``), the generated pools' targets are unchanged, and the
    copy data's key records the size only where one is given."""
    from pathlib import Path

    from openconductor.sim.plan_search import Profile, search_pool
    from openconductor.pool import load_pool
    from openconductor.train import sim_general_search
    from openconductor.evaluation.simulated import lookup_search_questions
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build, held_out_texts

    small = dict(targets="mixed", pools=1, per_pool=48, training_pool_examples=48, rank_questions=1, search=SearchSettings(screen=2, rank=2, top=1))
    exclude = held_out_texts(10, 1000)
    plain = build(CopySettings(**small), Path(POOL), PromptShape(), exclude=exclude)
    sized = build(CopySettings(training_pool_search=(6, 10), **small), Path(POOL), PromptShape(), exclude=exclude)
    own = SearchSettings(screen=6, rank=10, top=1)
    spec = load_pool(Path(POOL))
    table = search_pool([Profile.from_spec(w) for w in spec.workers], lookup_search_questions(exclude, own), lambda q: q.bucket, own)
    assert [b.plan for b in sized.searched[0].best] == [table[q.bucket][0].plan for q in sized.searched[0].questions]
    assert all(b.questions == 10 for b in sized.searched[0].best) and all(b.questions == 2 for b in plain.searched[0].best)
    assert {b.questions for b in sized.searched[1].best} == {b.questions for b in plain.searched[1].best} == {2}  # generated: as before
    key = lambda s: sim_general_search.data_key(s, Path(POOL), test_n=10, eval_seed=1000)["copy"]
    assert "training_pool_search" not in key(CopySettings(**small))
    assert key(CopySettings(training_pool_search=(6, 10), **small))["training_pool_search"] == [6, 10]
    with pytest.raises(ValueError, match="at least 1"):
        CopySettings(training_pool_search=(0, 10))


def test_the_training_pools_search_size_is_read_as_screen_comma_rank_and_refused_where_nothing_uses_it(monkeypatch, tmp_path, capsys):
    from openconductor.train import sim_general

    seen = []
    monkeypatch.setattr(sim_general, "search_run", lambda cfg, settings: seen.append(settings) or tmp_path)
    base = ["examples/train_sim_general_ranks.toml", "--output-dir", str(tmp_path)]
    sim_general.main(base + ["--stage", "search", "--targets", "mixed", "--training-pool-search", "80,160"])
    assert seen[0].training_pool_search == (80, 160)
    for bad, message in ((["--stage", "search", "--training-pool-search", "80"], "SCREEN,RANK"),
                         (["--stage", "search", "--training-pool-search", "0,160"], "at least 1"),
                         (["--stage", "grpo", "--training-pool-search", "80,160"], "sizes the copy's search; --stage grpo searches nothing"),
                         (["--stage", "search", "--targets", "ranks", "--training-pool-search", "80,160"], "copies none")):
        with pytest.raises(SystemExit):
            sim_general.main(base + bad)
        assert message in capsys.readouterr().err
    assert len(seen) == 1


def test_subtopic_ranking_targets_name_places_in_the_questions_subtopic_and_are_the_subtopic_rank_lookup(tmp_path):
    """``ranking = "subtopic"``: every training pool shows its profile per subtopic; the rank targets are the rank lookup
    over the subtopics' rankings, and their reasoning names a worker by its place in the question's subtopic ("graph#1"),
    which the runtime binds back to the very worker the plan chose, under fresh names too."""
    import json
    from pathlib import Path

    from openconductor.conductor.manifest import ManifestError
    from openconductor.conductor.ranking import area_keys, binding
    from openconductor.sim.plan_search import BUCKET
    from openconductor.sim.questions import SUBTOPIC_NAMES
    from openconductor.train import sim_general_search
    from openconductor.train.config import PromptSettings
    from openconductor.evaluation.simulated import rank_lookup_plans, trained_ranking
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build, rank_lookup_table, shown_pool
    from openconductor.workflow import parse_and_validate

    settings = CopySettings(pools=2, per_pool=48, training_pool_examples=8, targets="mixed", rank_questions=1, ranking="subtopic",
                            search=SearchSettings(screen=4, rank=4, top=1))
    data = build(settings, Path(POOL), PromptShape(show="ranking", rank_aliases=True, rename_workers=True))
    table = rank_lookup_table(Path(POOL), frozenset(), settings, "subtopic")
    keys = area_keys(list(SUBTOPIC_NAMES.values()))
    prompt = PromptSettings(show="ranking", ids_follow_names=True, rank_aliases=True)
    words = 0
    for p, (searched, (prompts, targets)) in enumerate(zip(data.searched, data.groups)):
        assert all(set(w.profile) == set(SUBTOPIC_NAMES.values()) for w in searched.spec.workers if w.provider == "simulated")
        assert "\nalgebra: " in prompts[0][0]["content"]
        if p:  # generated pools: the subtopic table's plans
            assert rank_lookup_plans(searched.spec, searched.questions, table, BUCKET, "subtopic") == [b.plan for b in searched.best]
        for i, (q, best, text) in enumerate(zip(searched.questions, searched.best, targets)):
            named = re.findall(r"\b([a-z]+)#\d", text.splitlines()[0])
            words += len(named)
            assert set(named) <= {keys[SUBTOPIC_NAMES[q.subtopic]]}  # places in the question's own subtopic only
            names, aliases = binding(prompt, shown_pool(searched.spec, p, i, True))  # as the example showed the pool
            bound = parse_and_validate(text, len(searched.spec.workers), max_steps=3, names=names, aliases=aliases)
            assert [s.worker for s in bound.steps] == [s.worker for s in best.plan.steps]
    assert words > 40
    with pytest.raises(ValueError, match="area, subtopic"):
        CopySettings(ranking="bucket")
    area_key = sim_general_search.data_key(CopySettings(), Path(POOL), test_n=10, eval_seed=1000)
    assert "ranking" not in area_key["copy"]  # files searched before the option load as they did
    assert sim_general_search.data_key(settings, Path(POOL), test_n=10, eval_seed=1000)["copy"]["ranking"] == "subtopic"
    # A conductor copied so is scored on pools shown the same way: its manifest says how; a record it cannot read is refused.
    manifest = tmp_path / "openconductor.json"
    manifest.write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {"ranking": "subtopic"}}}))
    assert trained_ranking(str(tmp_path)) == "subtopic" and trained_ranking("builtin:sim-bucket") == "subtopic"
    manifest.write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {}}}))
    assert trained_ranking(str(tmp_path)) == "area"  # a copy that records no ranking was shown each area's
    for bad in ({"settings": {"ranking": "bucket"}}, {"settings": "subtopic"}, ["subtopic"]):
        manifest.write_text(json.dumps({"format": "openconductor-conductor/1", "copy": bad}))
        with pytest.raises(ManifestError, match="copy"):
            trained_ranking(str(tmp_path))


def test_a_copy_started_from_a_trained_conductor_takes_its_adapter_and_refuses_one_of_other_layers(tmp_path):
    """``--init``: the copy starts from a conductor's weights; an adapter of other LoRA layers is refused by name,
    where peft alone would drop it (or leave layers fresh) without a word."""
    torch = pytest.importorskip("torch")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    from openconductor.train.config import TrainConfigError
    from openconductor.train.trainer import load_weights

    def lora_model(layers, seed=0, alpha=4):
        torch.manual_seed(seed)
        base = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA))
        config = LoraConfig(r=2, lora_alpha=alpha, target_modules=["q_proj"], layers_to_transform=layers, init_lora_weights=False)
        return get_peft_model(base, config)

    trained = lora_model([0])
    trained.save_pretrained(tmp_path / "trained")
    fresh = lora_model([0], seed=1)
    key = next(k for k in fresh.state_dict() if "lora_B" in k)
    assert not torch.equal(fresh.state_dict()[key], trained.state_dict()[key])
    load_weights(fresh, tmp_path / "trained")
    assert torch.equal(fresh.state_dict()[key], trained.state_dict()[key])
    for other in ([1], [0, 1]):
        with pytest.raises(TrainConfigError, match=r"differ \(layers_to_transform: \[0\] there, \[(0, )?1\] here\)"):
            load_weights(lora_model(other), tmp_path / "trained")
    with pytest.raises(TrainConfigError, match=r"lora_alpha: 4 there, 8 here"):  # alpha / r is in no weight
        load_weights(lora_model([0], alpha=8), tmp_path / "trained")
    with pytest.raises(TrainConfigError, match="trains without one: set model.lora"):
        load_weights(AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA)), tmp_path / "trained")
    # Full weights into a LoRA run would load nothing (their names lack peft's prefixes): refused.
    from safetensors.torch import save_file

    (tmp_path / "full").mkdir()
    full = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA)).state_dict()
    save_file({k: v.clone() for k, v in full.items() if k != "lm_head.weight"}, str(tmp_path / "full" / "model.safetensors"))  # tied
    with pytest.raises(TrainConfigError, match="holds full weights"):
        load_weights(lora_model([0]), tmp_path / "full")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainConfigError, match="no trained weights there"):
        load_weights(lora_model([0]), tmp_path / "empty")


def test_copy_data_searched_at_another_price_is_refused_and_the_checker_takes_the_runs_settings(tmp_path, capsys):
    from pathlib import Path

    from openconductor.train import sim_general_search
    from openconductor.train.sim_general_search import CopySettings, PromptShape, build

    settings = CopySettings(pools=1, per_pool=4, training_pool_examples=4, search=SearchSettings(screen=4, rank=4, top=1, token_weight=0.03))
    key = sim_general_search.data_key(settings, Path(POOL), test_n=1000, eval_seed=1000)
    path = sim_general_search.save(build(settings, Path(POOL), PromptShape()), tmp_path / sim_general_search.FILE_NAME, key)
    default_price = sim_general_search.data_key(CopySettings(pools=1, per_pool=4, training_pool_examples=4, search=SearchSettings(screen=4, rank=4, top=1)),
                                       Path(POOL), test_n=1000, eval_seed=1000)
    with pytest.raises(sim_general_search.CopyDataError, match=r"copy.search.token_weight: 0.03 in the file != 0.012 in this run"):
        sim_general_search.load(path, default_price, Path(POOL), PromptShape())
    with pytest.raises(SystemExit):
        sim_general_search.main(["examples/train_sim_general.toml", str(path), "--token-weight", "0.03", "--training-pool-examples", "4"])
    assert "copy.per_pool: 4 in the file != 48 in this run" in capsys.readouterr().err  # the price and the examples as given now match: what is left differs


@pytest.mark.heavy
def test_a_higher_token_price_never_makes_the_rank_lookup_dearer():
    """The copy's targets at ``--token-weight``: per bucket, the plan chosen at a higher price costs no more tokens
    (on the questions it is chosen on) than the one chosen at a lower price, and some get cheaper."""
    from openconductor.sim.plan_search import BUCKET
    from openconductor.evaluation.simulated import rank_table

    pools = [load_pool(POOL)] + [pool_spec(generate_pool(10_000 + i)) for i in range(3)]
    questions = make_questions(48 * 12, seed=5)
    cheap, dear = rank_table(pools, questions, BUCKET, token_weight=0.012), rank_table(pools, questions, BUCKET, token_weight=0.06)
    assert cheap.keys() == dear.keys()
    assert all(dear[b].tokens <= cheap[b].tokens + 1e-9 for b in cheap)
    assert sum(dear[b].tokens for b in dear) < sum(cheap[b].tokens for b in cheap)


def test_the_cli_gives_the_search_its_targets_price_and_rank_questions(monkeypatch, tmp_path):
    from openconductor.train import sim_general

    seen = []
    monkeypatch.setattr(sim_general, "search_run", lambda cfg, settings: seen.append(settings) or tmp_path)
    sim_general.main(["examples/train_sim_general_ranks.toml", "--stage", "search", "--targets", "mixed", "--token-weight", "0.025",
                      "--rank-questions", "20", "--ranking", "subtopic", "--training-pool-token-weight", "0.012", "--output-dir", str(tmp_path)])
    (settings,) = seen
    assert (settings.targets, settings.search.token_weight, settings.rank_questions, settings.ranking) == ("mixed", 0.025, 20, "subtopic")
    assert settings.training_pool_token_weight == 0.012


def test_grpo_refuses_another_ranking_than_its_warmup_was_copied_with(tmp_path):
    import json

    from openconductor.train.config import load_train_config
    from openconductor.train.sim_general import grpo_run
    from openconductor.train.sim_general_search import CopySettings

    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {"ranking": "subtopic"}}}))
    cfg = load_train_config("examples/train_sim_general_ranks.toml", {"run.output_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="per subtopic, and GRPO was asked for --ranking area: pass --ranking subtopic"):
        grpo_run(cfg, CopySettings())


def test_grpo_refuses_a_warmup_trained_on_another_prompt_and_says_which_settings_match_it(tmp_path, capsys):
    """GRPO from a shipped conductor without its `prompt.show` would train it on prompts it never saw."""
    import json

    from openconductor.train.config import TrainConfigError, load_train_config
    from openconductor.train.sim_general import grpo_run, main
    from openconductor.train.sim_general_search import CopySettings

    (tmp_path / "warmup").mkdir()
    shipped = json.loads(Path("src/openconductor/data/conductors/sim-bucket/openconductor.json").read_text())
    (tmp_path / "warmup" / "openconductor.json").write_text(json.dumps({k: shipped[k] for k in ("format", "prompt", "copy")}))
    cfg = load_train_config("examples/train_sim_general_ranks.toml", {"run.output_dir": str(tmp_path)})
    assert cfg.prompt.show != "ranking"
    with pytest.raises(TrainConfigError, match=r'prompts built with prompt.show="ranking" and this config builds them with prompt.show="profile": '
                                               r'pass --set prompt.show=ranking$'):
        grpo_run(cfg, CopySettings(ranking="subtopic"))
    with pytest.raises(SystemExit) as exited:  # the command line says it as an error, with no traceback
        main(["examples/train_sim_general_ranks.toml", "--stage", "grpo", "--output-dir", str(tmp_path)])
    assert exited.value.code == 2 and "pass --set prompt.show=ranking" in capsys.readouterr().err


def test_conductor_train_refuses_grpo_straight_from_a_conductor_trained_on_another_prompt(tmp_path):
    """`conductor train` with model.init and no warm-up is GRPO from that conductor: held to its prompts, before the
    model loads; with a warm-up (a copy may move a conductor onto a new prompt) or the matching --set it goes on."""
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.train.config import load_train_config
    from openconductor.train.trainer import check_grpo_start

    args = ["train", "examples/train_sim_general_ranks.toml", "--set", f"run.output_dir={tmp_path}",
            "--set", "model.init=builtin:sim-bucket", "--set", "warmup_sft.examples=0"]
    refused = CliRunner().invoke(app, args)
    said = " ".join(refused.output.split())
    assert refused.exit_code != 0 and "trained on prompts built with prompt.show=\"ranking\"" in said and "--set prompt.show=ranking" in said
    assert not any(tmp_path.iterdir())  # nothing was written: the model never loaded
    base = {"run.output_dir": str(tmp_path), "model.init": "builtin:sim-bucket"}
    for settings in ({"warmup_sft.examples": 0, "prompt.show": "ranking"}, {"warmup_sft.examples": 8}):
        check_grpo_start(load_train_config("examples/train_sim_general_ranks.toml", {**base, **settings}))  # no error


def test_grpo_takes_the_ranking_its_warmup_was_copied_with_when_none_is_given(monkeypatch, tmp_path):
    import json

    from openconductor.train import sim_general

    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "copy": {"settings": {"ranking": "subtopic"}}}))
    seen = []
    monkeypatch.setattr(sim_general, "grpo_run", lambda cfg, settings, per_pool: seen.append(settings.ranking) or tmp_path)
    monkeypatch.setattr(sim_general, "search_run", lambda cfg, settings: seen.append(settings.ranking) or tmp_path)
    for stage in ("grpo", "search"):
        sim_general.main(["examples/train_sim_general_ranks.toml", "--stage", stage, "--output-dir", str(tmp_path)])
    assert seen == ["subtopic", "area"]
