"""Familiarity (conductor/familiar.py): the similarity of a question to a trained conductor's training questions, the
threshold chosen by leaving one kind out, and `[conductor] unfamiliar = "best-fixed"`, which runs the fit's best
fixed workflow for a question unlike all of them. The conductor backend here is a SIMULATED responder that records
whether it was asked; the real path (the shipped conductor on the offline pool) is the last test."""

from __future__ import annotations

import json
import shutil

import pytest

from openconductor.executor import solve
from openconductor.policies import PolicyError, make_policy
from openconductor.conductor.familiar import (
    FAMILIAR_FILE,
    Fallback,
    Familiarity,
    FamiliarityError,
    Index,
    answer_instructions,
    grams,
    read_familiarity,
    strip_instruction,
    threshold,
)
from openconductor.pool import Pool, PoolSpec, WorkerSpec, load_default_pool
from openconductor.providers.simulated import register_responder

INSTRUCTION = "\n\nSolve the problem. End your response with 'Final answer: <answer>' and nothing after it."
SUMS = [f"What is {a} plus {a * 7 + 3}?" for a in range(2, 12)]
CAPITALS = [f"Which city is the capital of {c}?" for c in ("France", "Spain", "Peru", "Chile", "Kenya", "Norway", "Greece", "Cuba")]
SORTS = [f"Sort these words alphabetically: {w}" for w in ("pear, apple, fig", "dog, cat, emu", "red, blue, tan", "sun, moon, sky",
                                                           "oak, elm, ash", "cod, eel, ray")]
FALLBACK = 'Reasoning: the fixed workflow.\nmodel_id = [0, 1]\nsubtasks = ["Work it out.", "Check it."]\naccess_list = [[], ["all"]]'
STRANGE = "Decrypt this Caesar cipher text: YMJ XFNI RW. Provide only the decrypted text."


def _familiar(fallback: str = FALLBACK, workers: tuple[str, ...] = ("a", "b")) -> Familiarity:
    questions = [q + INSTRUCTION for q in SUMS + CAPITALS + SORTS]
    groups = ["sums"] * len(SUMS) + ["capitals"] * len(CAPITALS) + ["sorting"] * len(SORTS)
    asked = [(q, q[: -len(INSTRUCTION)]) for q in questions]
    return Familiarity.build(questions, groups, Fallback(name="pool:check", workflow=fallback, workers=list(workers)), answer_instructions(asked))


def test_similarity_is_a_cosine_of_character_grams():
    index = Index(["What is 3 plus 4?", "Sort these words: b, a"])
    same, other = index.similarities("What is 3 plus 4?")
    assert same == pytest.approx(1.0) and 0.0 <= other < 0.3
    assert index.similarities("zzzz qqqq") == [0.0, 0.0]  # no gram in common: no similarity, no division by zero
    assert grams("a") == {" a": 1, "a ": 1, " a ": 1}  # a word shorter than the longest gram counts once
    assert Index(["x"]).similarities("") == [0.0] and Index(["x"]).similarities("é" * 10) == [0.0]


def test_an_instruction_is_stripped_only_where_it_ends_the_question_after_a_space():
    assert strip_instruction("What is 2+2?" + INSTRUCTION, [INSTRUCTION]) == "What is 2+2?"
    assert strip_instruction("Count the dots.", ["s."]) == "Count the dots."  # the end of a word is not an instruction
    assert strip_instruction("Count the dots.", ["dots."]) == "Count the"
    assert strip_instruction("What is 2+2?" + INSTRUCTION + " Thanks", [INSTRUCTION]).endswith("Thanks")
    assert answer_instructions([("Q\n\nEnd.", "Q"), ("R", "R"), ("S\n\n  ", "S"), ("T", "")]) == ["\n\nEnd."]


def test_the_threshold_separates_a_kind_seen_from_a_kind_left_out():
    f = _familiar()
    assert 0.0 < f.threshold < 1.0
    # A new question of a training kind is familiar, the instruction on or off (it is stripped before comparing).
    for question in ("What is 40 plus 283?", "What is 40 plus 283?" + INSTRUCTION, "Which city is the capital of Italy?"):
        similarity, group = f.nearest(question)
        assert similarity >= f.threshold and group in ("sums", "capitals")
    assert f.nearest("What is 40 plus 283?")[0] == pytest.approx(f.nearest("What is 40 plus 283?" + INSTRUCTION)[0])
    assert f.nearest(STRANGE)[0] < f.threshold


def test_leaving_one_kind_out_needs_two_kinds_and_one_group_per_question():
    with pytest.raises(FamiliarityError, match="at least 2 groups"):
        threshold(SUMS, ["sums"] * len(SUMS))
    with pytest.raises(FamiliarityError, match="one group each"):
        Familiarity.build(SUMS, ["sums"], Fallback(name="pool:x", workflow=FALLBACK, workers=["a", "b"]))


def test_the_file_round_trips_and_bad_files_get_errors_that_say_what_to_do(tmp_path):
    f = _familiar()
    f.write(tmp_path)
    back = read_familiarity(tmp_path)
    assert back.data == f.data and back.nearest(STRANGE) == f.nearest(STRANGE)
    with pytest.raises(FamiliarityError, match='unfamiliar = "plan"'):
        read_familiarity(tmp_path / "none")
    good = json.loads((tmp_path / FAMILIAR_FILE).read_text())
    bad = [({"threshold": 0.3}, "fallback: Field required"), ({**good, "threshold": float("nan")}, "threshold"),
           ({**good, "threshold": 5}, "threshold"), ({**good, "threshold": "0.3"}, "threshold"), ({**good, "questions": []}, "questions"),
           ({**good, "instructions": "?."}, "instructions"), ({**good, "questions": [{"group": None, "question": "q"}]}, "group"),
           ([1, 2], "the whole file: Input should be a valid dictionary")]
    for data, where in bad:
        (tmp_path / FAMILIAR_FILE).write_text(json.dumps(data))
        with pytest.raises(FamiliarityError, match=f"not a familiarity file .*{where}"):
            read_familiarity(tmp_path)
    (tmp_path / FAMILIAR_FILE).write_text("{not json")
    with pytest.raises(FamiliarityError, match="not a familiarity file"):
        read_familiarity(tmp_path)


def _workers(*names: str) -> list[WorkerSpec]:
    return [WorkerSpec(name=n, provider="simulated", max_retries=0) for n in names]


def test_the_fallback_runs_on_the_workers_it_names_within_the_pools_steps():
    f = _familiar()
    reordered = PoolSpec(name="t", workers=_workers("c", "b", "a"))
    workflow = f.fallback_workflow(reordered, max_steps=3)
    assert [(s.worker, s.subtask) for s in workflow.steps] == [(2, "Work it out."), (1, "Check it.")]  # a, then b: by name
    with pytest.raises(FamiliarityError, match="needs worker\\(s\\) b, which pool 't' lacks"):
        f.fallback_workflow(PoolSpec(name="t", workers=_workers("a", "c")), max_steps=3)
    with pytest.raises(FamiliarityError, match="has 2 steps, more than \\[conductor\\] max_steps = 1"):
        f.fallback_workflow(reordered, max_steps=1)
    with pytest.raises(FamiliarityError, match="is not a workflow"):
        _familiar(fallback=FALLBACK.replace("[0, 1]", "[0, 5]")).fallback_workflow(reordered, max_steps=3)


def test_a_long_question_is_compared_by_its_head():
    f = _familiar()
    assert f.nearest("What is 40 plus 283? " + "x" * 1_000_000)[0] == pytest.approx(f.nearest("What is 40 plus 283? " + "x" * 4000)[0], abs=0.05)
    assert f.nearest("")[1] == ""


def _pool(tmp_path, unfamiliar: str) -> tuple[PoolSpec, list]:
    asked: list = []
    plan = 'Reasoning: one step.\nmodel_id = [1]\nsubtasks = ["solve"]\naccess_list = [[]]'
    register_responder("familiar-planner")(lambda spec, messages, rng: asked.append(messages) or plan)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "openconductor.json").write_text(json.dumps({"prompt": {"style": "compact", "examples": False}}))
    workers = _workers("a", "b")
    conductor = {"backend": {"name": "conductor:ckpt", "provider": "simulated", "options": {"world": "familiar-planner"}},
                 "checkpoint": str(checkpoint), "unfamiliar": unfamiliar}
    return PoolSpec(name="t", workers=workers, conductor=conductor), asked


async def test_an_unfamiliar_question_runs_the_fits_best_fixed_workflow_and_the_trace_says_why(tmp_path):
    spec, asked = _pool(tmp_path, "best-fixed")
    _familiar().write(tmp_path / "ckpt")
    policy = make_policy("conductor")
    policy.check(spec)
    async with Pool(spec) as pool:
        strange = await solve(STRANGE, policy, pool)
        usual = await solve("What is 40 plus 283?", policy, pool)
    assert [s.worker_name for s in strange.steps] == ["a", "b"] and strange.steps[0].subtask == "Work it out."
    assert strange.plan.fallback.startswith("unfamiliar question: its nearest training question") and "'pool:check' runs" in strange.plan.fallback
    assert strange.totals.conductor_usage.total_tokens == 0  # the conductor was not asked
    assert len(asked) == 1 and usual.plan.fallback is None and [s.worker_name for s in usual.steps] == ["b"]
    # Both runs record the test itself, typed, whether it gated or not.
    assert strange.plan.familiarity.gated and strange.plan.familiarity.similarity < strange.plan.familiarity.threshold
    assert not usual.plan.familiarity.gated and usual.plan.familiarity.nearest == "sums"


async def test_a_conversation_is_judged_by_its_current_request_not_its_instructions(tmp_path):
    # The server renders system prompts and earlier turns around the request; a long system prompt compared in its
    # place gated every question. The gate compares the request alone.
    from openconductor.server.requests import Accepted, Turn

    spec, asked = _pool(tmp_path, "best-fixed")
    _familiar().write(tmp_path / "ckpt")
    accepted = Accepted(model="m", turns=[Turn("system", "You are a helpful assistant. " * 300), Turn("user", "What is 40 plus 283?")])
    assert accepted.current_request() == "What is 40 plus 283?" and accepted.question().startswith("Instructions:")
    policy = make_policy("conductor")
    async with Pool(spec) as pool:
        rendered_only = await solve(accepted.question(), policy, pool)
        with_request = await solve(accepted.question(), policy, pool, request_text=accepted.current_request())
    assert rendered_only.plan.familiarity.gated  # what it did before: the instructions decided
    assert not with_request.plan.familiarity.gated and with_request.plan.familiarity.nearest == "sums"


async def test_plan_is_the_default_and_plans_every_question(tmp_path):
    spec, asked = _pool(tmp_path, "plan")
    assert PoolSpec(name="t", workers=spec.workers).conductor.unfamiliar == "plan"
    async with Pool(spec) as pool:
        run = await solve(STRANGE, make_policy("conductor"), pool)  # no familiar.json needed
    assert len(asked) == 1 and run.plan.fallback is None


def test_hand_made_files_and_training_sets_get_a_familiarity_error(tmp_path):
    ok = _familiar()
    (tmp_path / FAMILIAR_FILE).write_text("[" * 100_000)
    with pytest.raises(FamiliarityError, match="nested too deeply"):
        read_familiarity(tmp_path)
    with pytest.raises(FamiliarityError, match="give every question of a \\[data\\] file a domain"):
        Familiarity.build(SUMS + CAPITALS, [""] * len(SUMS) + ["capitals"] * len(CAPITALS), ok.data.fallback)
    # Identical questions in two groups: a cosine that rounds above 1 is held to 1, so the threshold is a valid one.
    twins = Familiarity.build(["What is 2 plus 3?"] * 2 + ["Sort a, b"] * 2, ["x", "x", "y", "y"], ok.data.fallback)
    assert 0.0 <= twins.threshold <= 1.0
    # A written file reads back with the digest of its bytes, which a result's fingerprint records.
    (tmp_path / "w").mkdir()
    ok.write(tmp_path / "w")
    assert read_familiarity(tmp_path / "w").digest == ok.digest and not list((tmp_path / "w").glob(".*tmp"))


def test_a_fallback_is_held_to_the_pools_max_steps_not_a_default(tmp_path):
    six = "Reasoning: six.\nmodel_id = [0, 1, 0, 1, 0, 1]\nsubtasks = [" + ", ".join(['"s"'] * 6) + "]\naccess_list = [" + ", ".join(["[]"] * 6) + "]"
    spec, _ = _pool(tmp_path, "best-fixed")
    familiar = _familiar(fallback=six)
    assert len(familiar.fallback_workflow(spec, 8).steps) == 6
    with pytest.raises(FamiliarityError, match="has 6 steps, more than \\[conductor\\] max_steps = 3"):
        familiar.fallback_workflow(spec, 3)


def test_best_fixed_needs_a_checkpoint_that_records_its_questions(tmp_path):
    spec, _ = _pool(tmp_path, "best-fixed")
    with pytest.raises(PolicyError, match=f"{FAMILIAR_FILE} not found"):
        make_policy("conductor").check(spec)
    _familiar(workers=("a", "z")).write(tmp_path / "ckpt")
    with pytest.raises(PolicyError, match="needs worker\\(s\\) z"):
        make_policy("conductor").check(spec)
    with pytest.raises(ValueError, match="unfamiliar"):
        PoolSpec(name="t", workers=spec.workers, conductor={"unfamiliar": "guess"})


async def test_a_verification_round_is_never_gated(tmp_path):
    from openconductor.policies import PlanRequest, Previous

    spec, asked = _pool(tmp_path, "best-fixed")
    _familiar().write(tmp_path / "ckpt")
    async with Pool(spec) as pool:
        plan = await make_policy("conductor").plan(PlanRequest(STRANGE, pool, max_steps=3, previous=Previous(answer="42")))
    assert len(asked) == 1 and plan.record.fallback is None


def test_the_setting_is_in_an_eval_folders_fingerprint_only_when_it_gates(tmp_path):
    spec, _ = _pool(tmp_path, "plan")
    policy = make_policy("conductor")
    assert "unfamiliar" not in policy.fingerprint(spec)["conductor"]  # folders made before the setting still resume
    _familiar().write(tmp_path / "ckpt")
    gating = policy.fingerprint(spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"unfamiliar": "best-fixed"})}))
    assert gating["conductor"]["unfamiliar"]["threshold"] == _familiar().threshold and "Work it out." in gating["conductor"]["unfamiliar"]["fallback"]
    # A file rewritten with other questions but the same count and threshold is another gate.
    edited = json.loads((tmp_path / "ckpt" / FAMILIAR_FILE).read_text())
    edited["questions"][0]["question"] = "Something else entirely"
    (tmp_path / "ckpt" / FAMILIAR_FILE).write_text(json.dumps(edited))
    again = policy.fingerprint(spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"unfamiliar": "best-fixed"})}))
    assert again["conductor"]["unfamiliar"]["sha256"] != gating["conductor"]["unfamiliar"]["sha256"]


@pytest.mark.timeout(300)
async def test_the_shipped_conductor_hands_an_unfamiliar_question_to_its_fixed_workflow_on_the_real_pool(tmp_path):
    """Real path: builtin:local-tools' familiar.json, the offline pool's real models and sandbox."""
    pytest.importorskip("xllamacpp")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (the python worker's sandbox) is not installed")
    spec = load_default_pool()
    assert spec.conductor.unfamiliar == "best-fixed"  # the offline pool's setting
    policy = make_policy("conductor")
    policy.check(spec)
    async with Pool(spec) as pool:
        run = await solve("In a room, each of 3 boxes holds 4 red coins and 2 blue coins. Flip every coin: how many coins show heads?", policy, pool)
    assert run.plan.fallback and run.plan.fallback.startswith("unfamiliar question")
    assert [s.worker_name for s in run.steps][:2] == ["qwen-coder", "python"]
    assert run.totals.conductor_usage.total_tokens == 0 and run.status == "ok"


def test_conductor_pool_says_what_an_unfamiliar_question_runs():
    from typer.testing import CliRunner

    from openconductor.cli import app

    out = " ".join(CliRunner().invoke(app, ["pool"]).output.split())  # the offline pool sets unfamiliar = "best-fixed"
    assert "unfamiliar questions: a question less than 0.225 similar to all 480 training questions runs pool:code-run-answer" in out


def test_the_server_gates_a_chat_by_its_request_not_its_system_prompt(tmp_path):
    # Real HTTP: the official openai client against uvicorn; SIMULATED workers and conductor backend.
    import httpx
    import openai
    from _server_kit import KEY, config, serve, sim_worker, write_pool

    _pool(tmp_path, "best-fixed")  # registers the planner and writes the checkpoint's manifest
    _familiar().write(tmp_path / "ckpt")
    conductor = {"backend": {"name": "planner", "provider": "simulated", "options": {"world": "familiar-planner"}},
                 "checkpoint": str(tmp_path / "ckpt"), "unfamiliar": "best-fixed", "max_steps": 3}
    pool = write_pool(tmp_path, "gated", [sim_worker("a"), sim_worker("b")], conductor=conductor)
    cfg = config(tmp_path, {"conductor": {"version": "v1", "pool": pool, "policy": "conductor"}})
    system = {"role": "system", "content": "You are a helpful assistant who answers carefully. " * 100}
    runs = {}
    with serve(cfg) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=30)
        for name, question in (("usual", "What is 40 plus 283?"), ("strange", STRANGE)):
            resp = client.chat.completions.create(model="conductor", messages=[system, {"role": "user", "content": question}])
            run_id = resp.model_extra["conductor"]["trace_id"]
            runs[name] = httpx.get(f"{url}/v1/traces/{run_id}", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert runs["usual"]["question"].startswith("Instructions:")  # the workers still see the whole conversation
    assert not runs["usual"]["plan"]["familiarity"]["gated"] and runs["usual"]["plan"]["familiarity"]["nearest"] == "sums"
    assert runs["strange"]["plan"]["familiarity"]["gated"] and [s["worker_name"] for s in runs["strange"]["steps"]] == ["a", "b"]


def test_conductor_pool_is_not_ready_when_the_gate_cannot_run(tmp_path):
    from typer.testing import CliRunner
    from _server_kit import sim_worker, write_pool

    from openconductor.cli import app

    _pool(tmp_path, "best-fixed")  # a checkpoint without familiar.json
    conductor = {"backend": {"name": "planner", "provider": "simulated", "options": {"world": "familiar-planner"}},
                 "checkpoint": str(tmp_path / "ckpt"), "unfamiliar": "best-fixed"}
    pool = tmp_path / write_pool(tmp_path, "gated", [sim_worker("a"), sim_worker("b")], conductor=conductor)
    out = " ".join(CliRunner().invoke(app, ["pool", str(pool)]).output.split())
    assert "unfamiliar questions: cannot run:" in out and "not ready: the conductor policy is refused on this pool" in out
    assert "ready: every key" not in out


def test_the_gate_compares_through_shared_grams_with_the_same_sums_as_every_pair():
    """The index compares a question only with the training questions that share a gram; each similarity is the same float
    as the dense cosine over every reference, so the gate decides exactly as before (on the shipped file's 480 questions)."""
    from openconductor.conductor.checkpoint import checkpoint_path

    shipped = read_familiarity(checkpoint_path("builtin:local-tools"))
    index = shipped.index

    def dense(text: str) -> list[float]:
        query = index._vector(grams(text))
        return [min(1.0, sum(w * ref.get(g, 0.0) for g, w in query.items())) for ref in index.vectors]

    texts = [q.question for q in shipped.data.questions[::7]] + [STRANGE, "\u01c2\u01c2", "", INSTRUCTION]
    assert all(index.similarities(t) == dense(t) for t in texts)
    assert index.similarities("\u01c2\u01c2") == [0.0] * len(index.vectors)  # no gram in common


def test_the_fallback_is_parsed_once_per_read_and_a_refit_file_is_read_again(tmp_path):
    _familiar().write(tmp_path)
    found = read_familiarity(tmp_path)
    spec = PoolSpec(name="p", workers=[WorkerSpec(name=n, provider="simulated") for n in ("a", "b")])
    assert found.fallback_workflow(spec, 3) == found.fallback_workflow(spec, 3) and "_fallback" in vars(found)
    changed = FALLBACK.replace("Check it.", "Check it twice.")
    _familiar(changed).write(tmp_path)
    again = read_familiarity(tmp_path)
    assert again is not found and again.fallback_workflow(spec, 3).steps[1].subtask == "Check it twice."
