"""``conductor eval`` on simulated workers (numbers here are simulated): policies, grading, resume,
summary, report files, traces, the CLI; the learned router. The real-pool end-to-end test is marked slow."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.evaluation import (
    RESULTS_FILE,
    EvalError,
    EvalRecord,
    load_records,
    pareto_front,
    question_seed,
    run_eval,
    summarize,
    write_report,
)
from openconductor.policies import PolicyError
from openconductor.policies.specs import parse_policy_specs
from openconductor.pool import load_pool
from openconductor.providers.simulated import register_responder
from openconductor.tasks import GraderUnavailable, Question, Task, load_task
from openconductor.traces import TraceStore

DATA = Path(__file__).parent / "data"
SIM_POOL = DATA / "sim_pool.toml"
ARITH = dict(min_terms=2, max_terms=2, max_digits=1, operators=["+"], allow_negation=False, allow_parentheses=False)
CALLS = {"n": 0}


@register_responder("eval-arith")
def _arith(spec, messages, rng):
    """Worker 'alpha' (skill 1) computes the sum; 'beta' (skill 0) is off by one."""
    CALLS["n"] += 1
    match = re.search(r"Calculate (\d+) \+ (\d+)\.", messages[-1]["content"])
    if not match:
        return "I cannot tell."
    value = int(match.group(1)) + int(match.group(2)) + (0 if spec.options.get("skill", 0) >= 1 else 1)
    return f"Adding the numbers gives {value}.\nFinal answer: {value}"


@register_responder("eval-planner")
def _planner(spec, messages, rng):
    """A planner that always sends the question to worker 0 (alpha)."""
    return 'Reasoning: one strong agent.\nmodel_id = [0]\nsubtasks = ["Solve the overall task."]\naccess_list = [[]]'


@pytest.fixture
def pool_spec():
    return load_pool(SIM_POOL)


@pytest.fixture
def task():
    return load_task("basic_arithmetic", limit=6, seed=1, **ARITH)


def test_policy_specs(pool_spec):
    labels = [label for label, _ in parse_policy_specs(["single:*", "moa", "self-reflection:rounds=1", "conductor:temperature=0.5"], pool_spec)]
    assert labels == ["single:alpha", "single:beta", "moa", "self-reflection:rounds=1", "conductor:temperature=0.5"]
    policy = dict(parse_policy_specs(["self-reflection:worker=beta,rounds=3"], pool_spec))["self-reflection:worker=beta,rounds=3"]
    assert policy.rounds == 3 and policy.worker == "beta"
    with pytest.raises(PolicyError, match="unknown policy 'nope'"):
        parse_policy_specs(["nope"], pool_spec)
    with pytest.raises(PolicyError, match="listed twice"):
        parse_policy_specs(["moa", "moa"], pool_spec)
    with pytest.raises(PolicyError, match="key=value"):
        parse_policy_specs(["random:3"], pool_spec)
    with pytest.raises(PolicyError, match="bad option"):
        parse_policy_specs(["moa:colour=red"], pool_spec)
    with pytest.raises(PolicyError, match="router"):
        parse_policy_specs(["router"], pool_spec)
    # A typo'd worker is an error before any question runs, not a row of failed runs.
    for spec in ["single:nosuch", "self-reflection:worker=nosuch", "moa:aggregator=nosuch", "single:7"]:
        with pytest.raises(PolicyError, match=re.escape(f"policy {spec!r}:") + ".*(unknown worker 'nosuch'; the pool has alpha, beta|not in the pool)"):
            parse_policy_specs([spec], pool_spec)
    assert [label for label, _ in parse_policy_specs(["single:1"], pool_spec)] == ["single:1"]  # an id in range


def test_question_seed_is_stable_and_policy_free():
    assert question_seed(0, "t", "q1", 0) == question_seed(0, "t", "q1", 0)
    assert len({question_seed(0, "t", "q1", r) for r in range(5)}) == 5


async def test_eval_grades_every_policy_and_resumes(tmp_path, pool_spec, task):
    policies = parse_policy_specs(["single:*", "moa", "conductor", "random"], pool_spec)
    store = TraceStore(tmp_path / "traces.sqlite3")
    records = await run_eval([task], policies, pool_spec, tmp_path / "out", repeats=2, concurrency=3, store=store)
    assert len(records) == 6 * 5 * 2  # 6 questions, 5 policies (single:* is two), 2 repeats
    by_policy = {row.policy: row for row in summarize(records)}
    assert by_policy["single:alpha"].accuracy == 1.0 and by_policy["single:beta"].accuracy == 0.0
    assert by_policy["conductor"].accuracy == 1.0  # the simulated planner always picks alpha
    assert by_policy["moa"].calls == 3 and by_policy["single:alpha"].calls == 1
    assert by_policy["conductor"].conductor_tokens > 0 and by_policy["single:alpha"].conductor_tokens == 0
    # Every run is in the trace store under the id in results.jsonl.
    saved = store.get(records[0].run_id)
    assert saved.final_answer == records[0].final_answer and saved.metadata["eval"]["task"] == "basic_arithmetic"

    CALLS["n"] = 0
    again = await run_eval([task], policies, pool_spec, tmp_path / "out", repeats=2, concurrency=3)
    assert CALLS["n"] == 0 and sorted(r.key for r in again) == sorted(r.key for r in records)

    # Drop three lines (the last one cut mid-write): exactly those runs are redone.
    path = tmp_path / "out" / RESULTS_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][: len(lines[-3]) // 2])
    assert len(load_records(path)) == len(lines) - 3
    resumed = await run_eval([task], policies, pool_spec, tmp_path / "out", repeats=2, concurrency=3)
    assert len(resumed) == len(records) and len(load_records(path)) == len(lines)


async def test_cache_makes_a_fresh_eval_free_and_identical(tmp_path, pool_spec, task):
    from openconductor.cache import ResponseCache

    policies = parse_policy_specs(["single:alpha", "self-reflection"], pool_spec)
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    first = await run_eval([task], policies, pool_spec, tmp_path / "a", cache=cache)
    CALLS["n"] = 0
    second = await run_eval([task], policies, pool_spec, tmp_path / "b", cache=ResponseCache(tmp_path / "cache.sqlite3"))
    assert CALLS["n"] == 0
    strip = lambda rs: sorted((r.key, r.final_answer, r.correct, r.tokens, r.calls, r.cost_usd) for r in rs)  # noqa: E731
    assert strip(first) == strip(second)


async def test_missing_grader_fails_before_any_call(tmp_path, pool_spec):
    math_task = Task("m", [Question(id="1", prompt="1+1?", reference="2", grader="maths")])  # a typo
    CALLS["n"] = 0
    with pytest.raises(GraderUnavailable):
        await run_eval([math_task], parse_policy_specs(["single:alpha"], pool_spec), pool_spec, tmp_path)
    assert CALLS["n"] == 0


def _record(policy: str, correct: bool, tokens: int, **extra) -> EvalRecord:
    base = dict(task="t", policy=policy, question_id=str(extra.pop("qid", 0)), repeat=0, question="q", run_id="r", seed=0,
                status="ok", final_answer="a", correct=correct, score=float(correct), steps=1, calls=1, tokens=tokens,
                worker_tokens=tokens, conductor_tokens=0, cost_usd=0.001, wall_s=1.0)
    return EvalRecord(**{**base, **extra})


def test_summary_statistics():
    records = [_record("p", c, 10 * (i + 1), qid=i) for i, c in enumerate([True, False, True, True])]
    (row,) = summarize(records)
    assert row.accuracy == 0.75 and row.tokens == 25 and row.n == 4
    assert row.stderr == pytest.approx(0.5 / 4**0.5)  # sample s.d. 0.5 over sqrt(n)


def test_pareto_front():
    points = [(100, 50), (200, 40), (300, 70), (50, 10), (300, 60)]
    assert pareto_front(points) == [3, 0, 2]


def test_report_files(tmp_path):
    records = [_record("cheap", False, 10), _record("cheap", True, 12, qid=1), _record("dear", True, 100), _record("dear", True, 90, qid=1)]
    rows = write_report(records, tmp_path, meta={"note": "test"})
    assert [r.policy for r in rows] == ["cheap", "dear"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["meta"] == {"note": "test"} and summary["rows"][1]["accuracy"] == 1.0
    assert "| t | dear | 2 | 100.0 ± 0.0 | 95 |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_file_from_elsewhere_is_rejected(tmp_path):
    path = tmp_path / RESULTS_FILE
    path.write_text('{"hello": 1}\n' + _record("p", True, 1).model_dump_json() + "\n")
    with pytest.raises(EvalError, match="not an eval record"):
        load_records(path)


def test_cli_eval_writes_the_report_and_resumes(tmp_path):
    runner = CliRunner()
    args = ["eval", "--task", "basic_arithmetic", "--limit", "3", "--pool", str(SIM_POOL), "-p", "single:*", "-p", "moa",
            "--out", str(tmp_path / "out"), "--cache-path", str(tmp_path / "c.sqlite3"), "--task-seed", "2"]
    for key, value in ARITH.items():
        args += ["--task-option", f"{key}={json.dumps(value)}"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| basic_arithmetic | single:alpha | 3 | 100.0 ± 0.0 |" in table and "| single:beta | 3 | 0.0 ± 0.0 |" in table
    for name in ("results.jsonl", "summary.json", "table.md", "pareto.png"):
        assert (tmp_path / "out" / name).exists()
    assert len(load_records(tmp_path / "out" / "results.jsonl")) == 9
    again = runner.invoke(app, args + ["--no-cache"])
    assert again.exit_code == 0 and "resuming: 9 run(s)" in again.output


def test_cli_eval_bad_input(tmp_path):
    runner = CliRunner()
    bad_policy = runner.invoke(app, ["eval", "-t", "basic_arithmetic", "--pool", str(SIM_POOL), "-p", "nope", "--out", str(tmp_path)])
    assert bad_policy.exit_code == 2 and "unknown policy" in bad_policy.output
    bad_task = runner.invoke(app, ["eval", "-t", "nope", "--pool", str(SIM_POOL), "--out", str(tmp_path)])
    assert bad_task.exit_code == 2 and "unknown task" in bad_task.output
    missing = runner.invoke(app, ["eval", "-t", "mmlu", "--data", str(tmp_path / "none.jsonl"), "--pool", str(SIM_POOL), "--out", str(tmp_path)])
    assert missing.exit_code == 2 and "not found" in missing.output
    option = runner.invoke(app, ["eval", "-t", "basic_arithmetic", "--task-option", "oops", "--pool", str(SIM_POOL), "--out", str(tmp_path)])
    assert option.exit_code == 2 and "key=value" in option.output


# ------------------------------------------------------------------- an --out folder of another setup


def _skills(spec, beta: float):
    """The same pool (same name, same worker names) with beta's skill changed: other numbers, same labels."""
    workers = [w.model_copy(update={"options": {**w.options, "skill": beta}}) if w.name == "beta" else w for w in spec.workers]
    return spec.model_copy(update={"workers": workers})


async def test_resuming_into_a_folder_of_another_pool_is_refused(tmp_path, pool_spec, task):
    policies = parse_policy_specs(["single:*"], pool_spec)
    await run_eval([task], policies, pool_spec, tmp_path / "out")
    other = _skills(pool_spec, 1.0)
    with pytest.raises(EvalError, match=r"holds results of another setup.*the pool: 'sim-eval' there, 'sim-eval' now \(same name, other workers"):
        await run_eval([task], parse_policy_specs(["single:*"], other), other, tmp_path / "out")
    assert len(load_records(tmp_path / "out" / RESULTS_FILE)) == 12  # nothing was mixed in


@pytest.mark.parametrize("change, fragment", [
    ("task", "question(s) of task 'basic_arithmetic' differ"),
    ("seed", "seed: 0 there, 5 now"),
    ("limits", "limits:"),
    ("conductor", "policy 'conductor' is set up differently"),
])
async def test_resuming_with_other_questions_settings_or_policy_setup_is_refused(tmp_path, pool_spec, task, change, fragment):
    await run_eval([task], parse_policy_specs(["conductor"], pool_spec), pool_spec, tmp_path / "out")
    spec, kwargs, tasks = pool_spec, {}, [task]
    if change == "task":  # same ids ("1-0", ...), other numbers
        tasks = [load_task("basic_arithmetic", limit=6, seed=1, **{**ARITH, "max_digits": 2})]
    elif change == "seed":
        kwargs["seed"] = 5
    elif change == "limits":
        kwargs["limits"] = spec.limits.model_copy(update={"max_calls": 2})
    else:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"max_steps": 1})})
    with pytest.raises(EvalError, match=re.escape(fragment)):
        await run_eval(tasks, parse_policy_specs(["conductor"], spec), spec, tmp_path / "out", **kwargs)


async def test_the_same_setup_extends_with_more_questions_policies_and_repeats(tmp_path, pool_spec):
    small = load_task("basic_arithmetic", limit=3, seed=1, **ARITH)
    await run_eval([small], parse_policy_specs(["single:alpha"], pool_spec), pool_spec, tmp_path / "out")
    big = load_task("basic_arithmetic", limit=6, seed=1, **ARITH)
    records = await run_eval([big], parse_policy_specs(["single:alpha", "moa"], pool_spec), pool_spec, tmp_path / "out", repeats=2)
    assert len(records) == 6 * 2 * 2
    setup = json.loads((tmp_path / "out" / "setup.json").read_text())
    assert sorted(setup["policies"]) == ["moa", "single:alpha"] and len(setup["questions"]["basic_arithmetic"]) == 6


async def test_a_results_folder_without_a_setup_is_refused_and_fresh_moves_it_aside(tmp_path, pool_spec, task):
    from openconductor.evaluation import start_fresh

    policies = parse_policy_specs(["single:alpha"], pool_spec)
    out = tmp_path / "out"
    await run_eval([task], policies, pool_spec, out)
    (out / "setup.json").unlink()  # as an older openconductor left it
    with pytest.raises(EvalError, match="without a setup.json .* pass --fresh"):
        await run_eval([task], policies, pool_spec, out)
    moved = start_fresh(out)
    assert (moved / RESULTS_FILE).exists() and not (out / RESULTS_FILE).exists()
    assert len(await run_eval([task], policies, pool_spec, out)) == 6


def test_cli_eval_into_a_folder_of_another_pool_says_so_and_fresh_starts_over(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text(SIM_POOL.read_text().replace("skill = 0.0", "skill = 1.0"))
    base = ["eval", "--task", "basic_arithmetic", "--limit", "2", "-p", "single:*", "--out", str(tmp_path / "out"), "--no-cache"]
    base += [arg for key, value in ARITH.items() for arg in ("--task-option", f"{key}={json.dumps(value)}")]
    runner = CliRunner()
    assert runner.invoke(app, base + ["--pool", str(SIM_POOL)]).exit_code == 0
    assert "| single:beta | 2 | 0.0 ± 0.0 |" in (tmp_path / "out" / "table.md").read_text()
    refused = runner.invoke(app, base + ["--pool", str(other)])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "holds results of another setup" in said and "pass --fresh" in said
    fresh = runner.invoke(app, base + ["--pool", str(other), "--fresh"])
    assert fresh.exit_code == 0, fresh.output
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| single:beta | 2 | 100.0 ± 0.0 |" in table  # the new pool's numbers, not the old ones
    assert any(p.name.startswith("replaced-") for p in (tmp_path / "out").iterdir())


def test_cli_eval_rejects_zero_or_negative_max_calls(tmp_path):
    for value in ("0", "-1"):
        result = CliRunner().invoke(app, ["eval", "-t", "basic_arithmetic", "--pool", str(SIM_POOL), "--max-calls", value, "--out", str(tmp_path)])
        assert result.exit_code == 2 and f"--max-calls {value}: should be greater than or equal to 1" in " ".join(result.output.split())


# ------------------------------------------------------------------------------------------ router


def _router_records():
    """alpha solves additions, beta solves questions about colours (synthetic per-worker results)."""
    adds = [f"Calculate {a} + {b}." for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (2, 9), (4, 4)]]
    colours = [f"What colour is {x}?" for x in ["the sky", "grass", "a banana", "snow", "coal", "a tomato"]]
    records = []
    for i, q in enumerate(adds + colours):
        is_add = q in adds
        records.append(_record("single:alpha", is_add, 10, qid=i, question=q))
        records.append(_record("single:beta", not is_add, 10, qid=i, question=q))
    return records


async def test_router_learns_which_worker_to_send_a_question_to(tmp_path, pool_spec):
    from openconductor.policies.base import PlanRequest
    from openconductor.policies.router import LearnedRouter, RouterModel, train_router
    from openconductor.pool import Pool

    model = train_router(_router_records(), l2=1e-3)
    assert model.arms == ["single:alpha", "single:beta"] and model.train_accuracy == {"single:alpha": 0.5, "single:beta": 0.5}
    path = model.save(tmp_path / "router.npz")
    router = LearnedRouter(path)
    assert [label for label, _ in parse_policy_specs([f"router:{path}"], pool_spec)] == ["router"]
    assert router.model.arms == RouterModel.load(path).arms
    async with Pool(pool_spec) as pool:
        add = await router.plan(PlanRequest("Calculate 6 + 1.", pool))
        colour = await router.plan(PlanRequest("What colour is an orange?", pool))
    assert add.workflow.steps[0].worker == pool_spec.index("alpha")
    assert colour.workflow.steps[0].worker == pool_spec.index("beta")
    assert "router chose single:alpha" in add.workflow.reasoning


def _pool_with_workflow(tmp_path):
    from openconductor.pool import load_pool

    path = tmp_path / "pool.toml"
    path.write_text(SIM_POOL.read_text() + """
[workflows.alpha-then-beta]
steps = [
  { worker = "alpha", subtask = "Solve it.", access = [] },
  { worker = "beta", subtask = "Check the answer above and give the final answer.", access = "all" },
]
""")
    return load_pool(path)


async def test_router_chooses_between_fixed_workflows_and_workers_per_question(tmp_path):
    """An arm can be one of the pool's fixed workflows: the router then plans all of its steps."""
    from openconductor.policies.base import PlanRequest
    from openconductor.policies.router import LearnedRouter, train_router
    from openconductor.pool import Pool

    records = [r.model_copy(update={"policy": "fixed:alpha-then-beta"}) if r.policy == "single:alpha" else r for r in _router_records()]
    records.append(_record("single:alpha", True, 10, qid=0, question="Calculate 1 + 2."))  # not an arm named below: ignored
    model = train_router(records, arms=["fixed:alpha-then-beta", "single:beta"], l2=1e-3)
    assert model.arms == ["fixed:alpha-then-beta", "single:beta"] and model.train_questions == 12
    spec = _pool_with_workflow(tmp_path)
    router = LearnedRouter(model)
    router.check(spec)
    async with Pool(spec) as pool:
        add = await router.plan(PlanRequest("Calculate 6 + 1.", pool))
        colour = await router.plan(PlanRequest("What colour is an orange?", pool))
        # Through the server the question renders the whole conversation; the router reads the current request.
        served = await router.plan(PlanRequest("What colour is an orange?", pool, request_text="Calculate 6 + 1."))
    assert [s.worker for s in add.workflow.steps] == [spec.index("alpha"), spec.index("beta")]
    assert served.workflow.steps == add.workflow.steps
    assert add.workflow.steps[1].subtask.startswith("Check the answer above") and "router chose fixed:alpha-then-beta" in add.workflow.reasoning
    assert [s.worker for s in colour.workflow.steps] == [spec.index("beta")]
    # Saved and loaded, it plans the same.
    loaded = LearnedRouter(model.save(tmp_path / "r.npz"))
    assert loaded.model.arms == model.arms


def test_router_arms_errors(tmp_path, pool_spec):
    import numpy as np

    from openconductor.policies.router import LearnedRouter, RouterError, RouterModel, train_router

    with pytest.raises(RouterError, match="an arm is single:WORKER or fixed:WORKFLOW, not 'moa'"):
        train_router(_router_records(), arms=["single:alpha", "moa"])
    with pytest.raises(RouterError, match=r"no results of fixed:nope to learn from"):
        train_router(_router_records(), arms=["single:alpha", "fixed:nope"])
    with pytest.raises(RouterError, match="at least two arms; the results hold single:alpha only"):
        train_router([r for r in _router_records() if r.policy == "single:alpha"])
    with pytest.raises(RouterError, match="at least two arms"):
        train_router(_router_records(), arms=["single:alpha", "single:alpha"])
    # A pool with none of the router's arms is refused before anything runs, naming what it has.
    model = RouterModel(["fixed:elsewhere", "single:gamma"], np.zeros((2, 384)), np.zeros(2), 1, {})
    with pytest.raises(PolicyError, match=r"trained on \['fixed:elsewhere', 'single:gamma'\]; pool 'sim-eval' has none of them"):
        LearnedRouter(model).check(pool_spec)
    # A model file from before arms were policies (its meta names workers) loads as single-worker arms.
    path = tmp_path / "old.npz"
    with path.open("wb") as fh:
        np.savez(fh, weights=np.zeros((2, 384)), bias=np.zeros(2),
                 meta=np.array(json.dumps({"workers": ["alpha", "beta"], "train_questions": 3, "train_accuracy": {}})))
    assert RouterModel.load(path).arms == ["single:alpha", "single:beta"]


def test_router_errors(tmp_path):
    from openconductor.policies.router import RouterError, RouterModel, train_router

    with pytest.raises(RouterError, match="single-worker results"):
        train_router([_record("moa", True, 1)])
    with pytest.raises(RouterError, match="share no question"):
        train_router([_record("single:a", True, 1, question="x"), _record("single:b", True, 1, question="y")])
    with pytest.raises(RouterError, match="not found"):
        RouterModel.load(tmp_path / "missing.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(RouterError, match="not a router model"):
        RouterModel.load(tmp_path / "bad.npz")


def test_cli_router_train(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in _router_records()))
    result = CliRunner().invoke(app, ["router-train", str(path), "--out", str(tmp_path / "r.npz")])
    assert result.exit_code == 0, result.output
    assert "trained on 12 question(s)" in result.output and (tmp_path / "r.npz").exists()
    bad = CliRunner().invoke(app, ["router-train", str(path), "--arm", "single:alpha", "--arm", "moa", "--out", str(tmp_path / "b.npz")])
    assert bad.exit_code == 2 and "an arm is single:WORKER or fixed:WORKFLOW, not 'moa'" in " ".join(bad.output.split())


# ------------------------------------------------------------------------------------- real models


@pytest.mark.slow
@pytest.mark.realmodel
def test_cli_eval_on_the_real_local_pool(tmp_path):
    """Two questions, every policy kind, on the offline local pool (tiny GGUF models in-process)."""
    records_path = tmp_path / "train" / "results.jsonl"
    runner = CliRunner()
    common = ["--task", "basic_arithmetic", "--limit", "2", "--cache-path", str(tmp_path / "c.sqlite3")]
    for key, value in ARITH.items():
        common += ["--task-option", f"{key}={json.dumps(value)}"]
    train = runner.invoke(app, ["eval", *common, "--task-seed", "9", "-p", "single:*", "--out", str(tmp_path / "train")])
    assert train.exit_code == 0, train.output
    trained = runner.invoke(app, ["router-train", str(records_path), "--out", str(tmp_path / "router.npz")])
    assert trained.exit_code == 0, trained.output
    result = runner.invoke(app, ["eval", *common, "-p", "single", "-p", "moa", "-p", "conductor", "-p", f"router:{tmp_path / 'router.npz'}",
                                 "--out", str(tmp_path / "test")])
    assert result.exit_code == 0, result.output
    records = load_records(tmp_path / "test" / "results.jsonl")
    assert len(records) == 8
    assert all(r.tokens > 0 and r.calls >= 1 and r.run_id for r in records)
    store = TraceStore()
    assert all(store.get(r.run_id).question == r.question for r in records)


def test_cli_eval_with_an_unknown_simulated_world_is_an_error_not_a_traceback(tmp_path):
    pool = tmp_path / "p.toml"
    pool.write_text('[[workers]]\nname = "w"\nprovider = "simulated"\noptions = { world = "no-such-world" }\n')
    result = CliRunner().invoke(app, ["eval", "-t", "basic_arithmetic", "--limit", "1", "-p", "single", "--pool", str(pool), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "unknown world 'no-such-world'" in " ".join(result.output.split())
