"""The training reward on known workflows, pool randomization, recursion blending, config loading.

All against the SIMULATED paper-constrained pool (examples/pools/simulated_paper.toml).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from openconductor.pool import Pool, load_pool
from openconductor.sim import world
from openconductor.train.config import RewardSettings, TrainConfigError, load_train_config
from openconductor.train.data import build_rows, load_items, sample_subset
from openconductor.train.reward import WorkflowReward, blend, score_completion
from openconductor.workflow import Step, Workflow

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "examples" / "pools" / "simulated_paper.toml"


def sure_pool(**skill_overrides):
    """The simulated pool with every worker's skill pinned (so outcomes are certain)."""
    spec = load_pool(POOL)
    workers = []
    for w in spec.workers:
        options = dict(w.options)
        options["skills"] = {d: skill_overrides.get(w.name, 1.0) for d in world.DOMAINS}
        workers.append(w.model_copy(update={"options": options}))
    return spec.model_copy(update={"workers": workers})


def one_step(worker: int, access=()) -> str:
    return Workflow((Step(worker, "Solve the overall task and give the final answer.", access),), reasoning="Reasoning: one agent.").render()


QUESTION = world.make_questions(1, seed=3)[0]
SETTINGS = RewardSettings()


async def score(text: str, spec, settings=SETTINGS, previous=None):
    async with Pool(spec) as pool:
        return await score_completion(
            text, question=QUESTION.text, reference=QUESTION.reference, task="simulated", pool=pool,
            settings=settings, max_steps=3, previous=previous,
        )


async def test_unparseable_scores_zero_with_typed_code():
    sample = await score("I think agent two should do it.", load_pool(POOL))
    assert (sample.reward, sample.parsed, sample.error) == (0.0, False, "unparseable")
    out_of_range = await score(one_step(17), load_pool(POOL))
    assert (out_of_range.reward, out_of_range.error) == (0.0, "unknown_worker")


async def test_correct_scores_one_and_wrong_scores_half():
    right = await score(one_step(2), sure_pool())
    assert right.correct and right.reward == 1.0 and right.workers == ["gemini-2.5-pro"]
    wrong = await score(one_step(2), sure_pool(**{"gemini-2.5-pro": 0.0}))
    assert not wrong.correct and wrong.reward == 0.5 and wrong.final_answer.startswith("(gemini")


async def test_configurable_values_cost_and_step_penalties():
    settings = RewardSettings(correct=2.0, wrong=0.25, cost_weight=1000.0, step_weight=0.1)
    sample = await score(one_step(2), sure_pool(), settings)
    assert sample.cost_usd > 0 and sample.tokens > 0
    assert sample.reward == pytest.approx(2.0 - 1000.0 * sample.cost_usd - 0.1)
    wrong = await score(one_step(0), sure_pool(**{"gemma-3-27b-it": 0.0}), settings)
    assert wrong.reward == pytest.approx(0.25 - 1000.0 * wrong.cost_usd - 0.1)
    tokens = await score(one_step(2), sure_pool(), RewardSettings(token_weight=0.05))
    assert tokens.reward == pytest.approx(1.0 - 0.05 * tokens.tokens / 1000) and tokens.tokens > 100


async def test_worker_failure_is_scored_not_raised():
    spec = load_pool(POOL)
    broken = [w.model_copy(update={"options": {**w.options, "fail_rate": 1.0, "failure": "error"}}) for w in spec.workers]
    spec = spec.model_copy(update={"workers": broken})
    sample = await score(one_step(1), spec, RewardSettings(worker_failure=-0.5))
    assert sample.parsed and sample.error == "run_error" and sample.reward == -0.5
    graded = await score(one_step(1), spec, RewardSettings(worker_failure="grade"))
    assert graded.reward == 0.0  # no answer at all: not well formed


async def test_rewards_run_without_the_pools_own_conductor_backend(monkeypatch):
    """Training plans with the model being trained: a conductor backend that cannot run here (its SDK or
    key missing, as llama.cpp was on a GPU machine) must not stop the reward from executing plans."""
    from openconductor.pool import PoolConfigError, WorkerSpec
    from openconductor.train.config import PromptSettings

    monkeypatch.delenv("OC_TEST_ABSENT_KEY", raising=False)
    spec = sure_pool()
    backend = WorkerSpec(name="remote-planner", provider="openai", model="gpt-4o-mini", api_key_env="OC_TEST_ABSENT_KEY")
    spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"backend": backend})})
    with pytest.raises(PoolConfigError, match="OC_TEST_ABSENT_KEY"):
        Pool(spec)
    reward = WorkflowReward(spec, SETTINGS, PromptSettings(max_steps=3))
    try:
        sample = await score_completion(one_step(2), question=QUESTION.text, reference=QUESTION.reference, task="simulated",
                                        pool=reward.pool(), settings=SETTINGS, max_steps=3)
    finally:
        await reward.aclose()
    assert sample.correct and sample.reward == 1.0
    assert spec.for_execution().workers == spec.workers and spec.for_execution().conductor.backend is None


def test_questions_reveal_domain_only_through_text():
    qs = world.make_questions(40, seed=5)
    assert {q.domain for q in qs} == set(world.DOMAINS)
    for q in qs:
        assert world.domain_of(q.text) == q.domain
        assert world.gold_answer(q.text) == q.reference
        assert q.reference not in q.text or q.domain == "mmlu"  # letters appear as options only
    other = world.make_questions(40, seed=6, exclude=frozenset(q.text for q in qs))
    assert {q.text for q in qs}.isdisjoint({q.text for q in other})


def test_held_out_items_never_repeat_training_items():
    cfg = load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml")
    train, held = load_items(cfg), load_items(cfg, held_out=True)
    assert len(held) == cfg.data.n_eval and {i.question for i in train}.isdisjoint({i.question for i in held})
    assert {i.domain for i in held} == set(world.DOMAINS)


async def test_recursive_round_accept_and_revise():
    spec = sure_pool(**{"gemma-3-27b-it": 0.0})
    accept = "The answer looks right.\nmodel_id = []\nsubtasks = []\naccess_list = []"
    kept_right = await score(accept, spec, previous=f"Final answer: {QUESTION.reference}")
    assert kept_right.accepted and kept_right.reward == 1.0
    kept_wrong = await score(accept, spec, previous="Final answer: nonsense")
    assert kept_wrong.reward == 0.5
    revised = await score(one_step(2), spec, previous="Final answer: nonsense")
    assert revised.correct and revised.reward == 1.0
    # Three empty lists are only an answer in a recursive round.
    assert (await score(accept, spec)).error == "empty"


def test_blend_discount():
    assert blend(1.0, 0.0, 0.25) == pytest.approx(0.75)
    assert blend(0.5, 1.0, 0.25) == pytest.approx(0.625)
    assert blend(0.0, 1.0, 0.0) == 0.0


async def test_reward_batch_uses_subsets_rounds_and_logs_metrics():
    spec = sure_pool(**{"gemma-3-27b-it": 0.0})
    reward = WorkflowReward(spec, SETTINGS, load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml").prompt)
    logged: dict[str, list[float]] = {}
    completions = [
        [{"role": "assistant", "content": one_step(0)}],  # id 0 of the subset [2, 0] = gemini: right
        [{"role": "assistant", "content": one_step(1)}],  # id 1 of the subset = gemma: wrong
        [{"role": "assistant", "content": "no plan"}],
        [{"role": "assistant", "content": "model_id = []\nsubtasks = []\naccess_list = []"}],
    ]
    rewards = await reward(
        prompts=[[]] * 4, completions=completions, question=[QUESTION.text] * 4, reference=[QUESTION.reference] * 4,
        task=["simulated"] * 4, workers=[[2, 0]] * 4, round=[1, 1, 1, 2], previous=["", "", "", f"Final answer: {QUESTION.reference}"],
        blend=[False] * 4, log_metric=lambda k, v: logged.setdefault(k, []).append(v),
    )
    assert rewards == [1.0, 0.5, 0.0, 1.0]
    assert reward.last_samples[0].workers == ["gemini-2.5-pro"] and reward.last_samples[1].workers == ["gemma-3-27b-it"]
    assert logged["format_error_rate"] == [0.25]
    assert logged["worker_share/gemini-2.5-pro"] == [0.5]
    assert "topology_diversity" in logged and "cost_per_workflow" in logged
    await reward.aclose()


async def test_on_policy_recursion_blends_first_round_reward():
    spec = sure_pool(**{"gemma-3-27b-it": 0.0})
    prompt = load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml").prompt
    seen = []

    async def sampler(batch):
        seen.append(batch[0][-1]["content"])
        return [one_step(2)]  # the recursive round revises with a sure worker

    reward = WorkflowReward(spec, SETTINGS, prompt, discount=0.25, recursive_sampler=sampler)
    [r] = await reward(
        prompts=[[]], completions=[one_step(0)], question=[QUESTION.text], reference=[QUESTION.reference],
        task=["simulated"], workers=[None], round=[1], previous=[""], blend=[True],
    )
    assert r == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    assert "<previous answer>" in seen[0]
    await reward.aclose()


def test_pool_randomization_renumbers_and_shows_only_the_subset():
    cfg = load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml", {"randomize.enabled": True, "randomize.k_min": 2, "randomize.k_max": 3, "data.n_train": 12, "prompt.show": "names",
                                                                      "search.candidates": 0})  # the domain search needs a fixed pool
    spec = load_pool(cfg.path(cfg.pool))
    rows = build_rows(cfg, spec, load_items(cfg))
    for row in rows:
        assert 2 <= len(row.workers) <= 3 and len(set(row.workers)) == len(row.workers)
        system = row.prompt[0]["content"]
        assert f"Model id {len(row.workers) - 1}" in system and f"Model id {len(row.workers)}" not in system
        # Renumbered ids, but each worker stays identifiable by its name (routing can be learned).
        for new_id, old in enumerate(row.workers):
            assert f"Model id {new_id}: {spec.workers[old].name}" in system
    assert len({tuple(r.workers) for r in rows}) > 1
    rng = random.Random(0)
    for _ in range(50):
        sub = sample_subset(6, 2, 5, rng)
        assert 2 <= len(sub) <= 5 and all(0 <= i < 6 for i in sub)


def test_recursion_rows_are_their_own_prompts():
    cfg = load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml", {"recursion.fraction": 0.5, "data.n_train": 8, "data.skip_solved_by_all": False})
    rows = build_rows(cfg, load_pool(cfg.path(cfg.pool)), load_items(cfg))
    second = [r for r in rows if r.round == 2]
    assert len(second) == 4 and len(rows) == 12
    for row in second:
        assert "<previous answer>" in row.prompt[1]["content"] and row.previous in row.prompt[1]["content"]


def test_config_errors_are_typed_and_actionable(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('pool = "p.toml"\n[grpo]\nnum_generations = 1\n')
    with pytest.raises(TrainConfigError, match="num_generations must be at least 2"):
        load_train_config(bad)
    bad.write_text('pool = "p.toml"\n[grpo]\nnum_generations = 4\nper_device_train_batch_size = 6\ngradient_accumulation_steps = 1\n')
    with pytest.raises(TrainConfigError, match="multiple of"):
        load_train_config(bad)
    bad.write_text('pool = "p.toml"\n[grpo]\nlearnig_rate = 1\n')
    with pytest.raises(TrainConfigError, match="grpo.learnig_rate is not a TRL GRPOConfig field"):
        load_train_config(bad)
    bad.write_text('pool = "p.toml"\n[grpo]\noutput_dir = "x"\n')
    with pytest.raises(TrainConfigError, match="set by the trainer"):
        load_train_config(bad)
    bad.write_text('pool = "p.toml"\n[randomize]\nenabled = true\n')
    with pytest.raises(TrainConfigError, match="nothing\\s+would identify a worker"):
        load_train_config(bad)
    bad.write_text("pool = [")
    with pytest.raises(TrainConfigError, match="not valid TOML"):
        load_train_config(bad)
    with pytest.raises(TrainConfigError, match="not found"):
        load_train_config(tmp_path / "missing.toml")


def test_paper_defaults():
    cfg = load_train_config(ROOT / "examples" / "train_paper_qwen7b.toml")
    g = cfg.settings
    assert (g["beta"], g["temperature"], g["learning_rate"], g["lr_scheduler_type"], g["warmup_steps"], g["max_completion_length"]) == (0.0, 1.0, 1e-6, "cosine", 0.03, 1024)
    assert (cfg.reward.correct, cfg.reward.wrong, cfg.reward.unparseable) == (1.0, 0.5, 0.0)


def test_pool_file_names_a_built_in_world_and_bad_world_module_is_typed():
    from openconductor.pool import PoolConfigError, WorkerSpec
    from openconductor.providers.simulated import SimulatedProvider

    spec = load_pool(POOL)
    assert all(w.options["world"] == "paper-v2" and "world_module" not in w.options for w in spec.workers)
    with pytest.raises(PoolConfigError, match="cannot import world_module"):
        SimulatedProvider(WorkerSpec(name="x", provider="simulated", options={"world": "w", "world_module": "no.such.module"}))
    # A pool file written before the world left the training package gets the fix, not an import error.
    with pytest.raises(PoolConfigError, match="world_module 'openconductor.train.world' no longer exists.*delete it"):
        SimulatedProvider(WorkerSpec(name="x", provider="simulated", options={"world": "paper-v2", "world_module": "openconductor.train.world"}))


def test_a_built_in_world_loads_itself_without_the_training_package():
    """A fresh interpreter: the pool's first simulated worker imports the paper-v2 world, and nothing of
    openconductor.train is imported on the way."""
    code = ("import sys\nfrom openconductor.pool import load_pool\nfrom openconductor.providers.simulated import RESPONDERS, SimulatedProvider\n"
            f"assert 'paper-v2' not in RESPONDERS\nSimulatedProvider(load_pool({str(POOL)!r}).workers[0])\n"
            "assert 'paper-v2' in RESPONDERS, RESPONDERS\nassert not [m for m in sys.modules if m.startswith('openconductor.train')]\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr


@pytest.fixture
def fixed_math_answers():
    """A simulated world whose workers answer a fixed boxed number each (their `answer` option)."""
    from openconductor.providers.simulated import RESPONDERS, register_responder

    register_responder("fixed-answer")(lambda spec, messages, rng: f"The sum is \\boxed{{{spec.options['answer']}}}.")
    yield
    RESPONDERS.pop("fixed-answer", None)


async def test_real_task_reward_goes_through_the_math_grader(fixed_math_answers):
    from openconductor.pool import ConductorSpec, PoolSpec, WorkerSpec

    workers = [WorkerSpec(name=n, provider="simulated", options={"world": "fixed-answer", "answer": a}) for n, a in (("right", "1/2"), ("wrong", "0.4"))]
    spec = PoolSpec(workers=workers, conductor=ConductorSpec(worker="right"))
    question = "What is 0.25 + 0.25? Give a fraction."
    async with Pool(spec) as pool:
        right, wrong = [
            await score_completion(one_step(i), question=question, reference="0.5", task="math", pool=pool, settings=SETTINGS, max_steps=3)
            for i in (0, 1)
        ]
    # math-verify decides 1/2 == 0.5 (a string comparison would not): the real grader ran.
    assert (right.reward, right.correct) == (1.0, True)
    assert (wrong.reward, wrong.correct) == (SETTINGS.wrong, False)


async def test_replay_store_answers_repeated_worker_calls_without_running_them(tmp_path):
    """Real path: the python tool worker runs each program in the bubblewrap sandbox once; a repeated
    batch (the same question, subtask and worker) is answered from the replay store."""
    from openconductor.cache import ResponseCache
    from openconductor.pool import PoolSpec, WorkerSpec

    spec = PoolSpec(name="t", workers=[WorkerSpec(name="python", provider="python", max_retries=0, options={"wall_s": 10, "cpu_s": 5})])
    cache = ResponseCache(tmp_path / "replay.sqlite3", match="context")
    reward = WorkflowReward(spec, SETTINGS, load_train_config(ROOT / "examples" / "train_cpu_smollm2.toml").prompt, cache=cache)
    program = lambda value: Workflow((Step(0, f"Run it:\n```python\nprint({value})\n```", ()),), reasoning="Reasoning: compute it.").render()  # noqa: E731
    completions = [program("6 * 7"), program("6 * 7 - 1")]
    batch = dict(prompts=[[]] * 2, question=["What is 6 times 7?"] * 2, reference=["42"] * 2, task=["numeric"] * 2)
    logged: dict[str, list[float]] = {}
    log = lambda k, v: logged.setdefault(k, []).append(v)  # noqa: E731
    first = await reward(completions=completions, log_metric=log, **batch)
    assert first == [1.0, 0.5] and cache.stats() == {"hits": 0, "misses": 2, "entries": 2}
    second = await reward(completions=completions, log_metric=log, **batch)
    assert second == first and cache.stats() == {"hits": 2, "misses": 2, "entries": 2}
    assert reward.last_samples[0].run.steps[0].cached  # served from the store, not the sandbox
    assert logged["replay/hit_rate"] == [0.0, 1.0] and logged["replay/new_calls"] == [2.0, 0.0]
    await reward.aclose()


def test_a_step_cost_with_per_group_scaling_is_warned_about(caplog):
    """1 question x 16 rollouts with batch scaling is per-group scaling, where a step cost drives plans to one
    step (docs/history.md). The default recipe (2 questions x 8, batch scaling) loads without the warning."""
    path = ROOT / "examples" / "train_cpu_smollm2.toml"
    with caplog.at_level("WARNING", logger="openconductor.train.config"):
        load_train_config(path)
        assert "cost term is blown up" not in caplog.text
        load_train_config(path, {"grpo.num_generations": 16, "grpo.per_device_train_batch_size": 16, "reward.step_weight": 0.01})
        assert "1 question(s) per batch" in caplog.text
        caplog.clear()
        load_train_config(path, {"grpo.num_generations": 16, "grpo.per_device_train_batch_size": 16, "reward.step_weight": 0.0})
        assert "cost term is blown up" not in caplog.text


def test_batch_metrics_log_who_writes_and_who_finishes_each_domain():
    from openconductor.train.reward import Sample, batch_metrics

    chain = Sample(reward=1.0, parsed=True, correct=True, steps=2, workers=["gpt-5-minimal", "gemini-2.5-pro"], pattern=((0, ()), (1, "all")))
    alone = Sample(reward=1.0, parsed=True, correct=True, steps=1, workers=["gpt-5-minimal"], pattern=((0, ()),))
    broken = Sample(reward=0.0, parsed=False)
    metrics = batch_metrics([chain, alone, broken], ["g", "g", "g"], ["lcb", "lcb", "lcb"])
    assert metrics["lcb/first_worker/gpt-5-minimal"] == 1.0  # the unparseable plan counts in neither share
    assert metrics["lcb/final_worker/gpt-5-minimal"] == metrics["lcb/final_worker/gemini-2.5-pro"] == 0.5
