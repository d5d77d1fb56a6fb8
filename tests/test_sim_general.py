"""The general conductor's pieces (SIMULATED world v3): the plan search, the shared-prefix supervised copy,
and search-and-copy targets across generated pools. No model download: a tiny random Llama where one is needed."""

from __future__ import annotations

import tomllib

import pytest

from openconductor.pool import PoolSpec, load_pool
from openconductor.sim.plan_search import SearchSettings, candidate_plans, search_group
from openconductor.sim.pools import generate_pool, pool_toml
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

    from openconductor.train.prefix_sft import batch_loss

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


def test_the_copy_stops_after_max_batches_and_refuses_a_cap_below_one(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from openconductor.train.prefix_sft import copy_plans

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer(tmp_path / "tok"))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA))
    groups = [([[{"role": "system", "content": f"pool {g} model id"}, {"role": "user", "content": f"task {i}"}] for i in range(3)],
               ["Reasoning: one agent answers."] * 3) for g in range(2)]
    before = [p.detach().clone() for p in model.parameters()]
    assert len(copy_plans(model, tok, groups, epochs=2, lr=1e-3, batch_size=1, max_batches=5)) == 5  # of 12
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert len(copy_plans(model, tok, groups, epochs=1, lr=1e-3, batch_size=2, max_batches=100)) == 4  # every batch, no more
    with pytest.raises(ValueError, match="max_batches must be at least 1"):
        copy_plans(model, tok, groups, epochs=1, lr=1e-3, batch_size=1, max_batches=0)


def test_the_cli_refuses_a_max_batches_below_one_before_searching(capsys):
    from openconductor.train.sim_general import main

    with pytest.raises(SystemExit) as exit_:
        main(["examples/train_sim_general.toml", "--max-batches", "0"])
    assert exit_.value.code == 2 and "--max-batches must be at least 1" in capsys.readouterr().err


def test_copy_targets_name_the_bucket_and_the_workers_and_parse(tmp_path):
    from pathlib import Path

    from openconductor.train.sim_general import CopySettings, PromptShape, build

    settings = CopySettings(pools=1, per_pool=6, training_pool_examples=6, search=SearchSettings(screen=4, rank=4, top=1))
    data = build(settings, Path(POOL), PromptShape())
    assert [len(p) for p, _ in data.groups] == [6, 6]
    spec = PoolSpec.model_validate(tomllib.loads(pool_toml(generate_pool(settings.pool_seed))))
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
    from openconductor.sim.world_v3 import solo_correct
    from openconductor.train.config import load_train_config
    from openconductor.train.sim_general import CopySettings, grpo_rows, training_pools, union_pool

    cfg = load_train_config("examples/train_sim_general.toml")
    pools = training_pools(CopySettings(pools=3), cfg.pool_path)
    union, indices = union_pool(pools)
    assert len({w.name for w in union.workers}) == len(union.workers) == sum(len(p.workers) for p in pools)
    rows = grpo_rows(cfg, pools, indices, 6, seed=1, exclude=frozenset())
    assert len(rows) == 6 * len(pools) and rows[0].workers != rows[1].workers  # pools in rotation
    for row in rows:
        spec = pools[indices.index(row.workers)]
        assert [union.workers[i].options == w.options for i, w in zip(row.workers, spec.workers)] == [True] * len(spec.workers)
        assert f"Model id 0: {spec.workers[0].name} — " in row.prompt[0]["content"]
        assert not all(solo_correct(row.question, Profile.from_spec(w)) for w in spec.workers)


def test_a_relative_output_dir_is_taken_from_the_working_directory_not_the_configs(tmp_path, monkeypatch):
    from pathlib import Path

    from openconductor.train import sim_general

    config = Path("examples/train_sim_general.toml").resolve()
    seen = []
    # Mocked: the copy itself (search and training) is not what this checks.
    monkeypatch.setattr(sim_general, "copy_run", lambda cfg, settings, **kw: seen.append(cfg.output_dir) or cfg.output_dir)
    monkeypatch.chdir(tmp_path)
    assert sim_general.main([str(config), "--output-dir", "runs/x"]) == 0
    assert seen == [tmp_path / "runs" / "x"]
