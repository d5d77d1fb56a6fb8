"""`conductor fit`: the whole path from a pool file to a conductor, end to end on a SIMULATED pool.

The pool's two workers are simulated responders (labelled: `calc` adds the two numbers of "What is A plus B?",
`know` names capitals); the questions are a user's JSONL in three kinds: sums, capitals, and a mixed kind where
half the questions need each worker, so the right plan differs per question inside one kind. The conductor is
a tiny random Llama (train_helpers): the test checks the machinery (stages, replay store, caps, resume, the
dry run's estimate, the evaluation's rows), not the quality of its plans. Everything else is real: the search,
the copy and GRPO steps on the model, the one evaluator with the real graders.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")
sys.path.insert(0, str(Path(__file__).parent))

from train_helpers import TINY_LLAMA, tiny_tokenizer  # noqa: E402

from openconductor import worker_message  # noqa: E402
from openconductor.conductor.familiar import read_familiarity  # noqa: E402
from openconductor.pool import load_default_pool, load_pool  # noqa: E402
from openconductor.train.warmup import taught_wordings  # noqa: E402
from openconductor.providers.simulated import RESPONDERS, register_responder  # noqa: E402
from openconductor.train.search.candidates import candidate_set  # noqa: E402
from openconductor.train.config import TrainConfigError  # noqa: E402
from openconductor.train.fit.context import FitSettings  # noqa: E402
from openconductor.train.fit.run import plan_fit, run_fit  # noqa: E402
from openconductor.train.fit.questions import FitDataError  # noqa: E402

CAPITALS = {"France": "Paris", "Spain": "Madrid", "Italy": "Rome", "Germany": "Berlin", "Japan": "Tokyo", "Egypt": "Cairo",
            "Peru": "Lima", "Kenya": "Nairobi", "Chile": "Santiago", "Norway": "Oslo", "Greece": "Athens", "Poland": "Warsaw",
            "Cuba": "Havana", "Iran": "Tehran", "Iraq": "Baghdad"}


def _task(messages) -> str:
    context = worker_message.parse_rendered(messages)
    return context.question if context else str(messages[-1]["content"])


@pytest.fixture(scope="module")
def world():
    """The SIMULATED workers' answers."""

    def calc(spec, messages, rng):
        m = re.search(r"What is (\d+) plus (\d+)", _task(messages))
        return f"Final answer: {int(m.group(1)) + int(m.group(2))}" if m else "Final answer: I do not know"

    def know(spec, messages, rng):
        m = re.search(r"capital of (\w+)", _task(messages))
        return f"Final answer: {CAPITALS[m.group(1)]}" if m else "Final answer: 0"

    register_responder("fit-calc")(calc)
    register_responder("fit-know")(know)
    yield
    RESPONDERS.pop("fit-calc", None)
    RESPONDERS.pop("fit-know", None)


def _files(tmp: Path) -> dict[str, Path]:
    workers = [("calc", "fit-calc", "adds numbers"), ("know", "fit-know", "knows capitals")]
    (tmp / "pool.toml").write_text('name = "fit-sim"\n[conductor]\nmax_steps = 2\n' + "".join(
        f'[[workers]]\nname = "{n}"\nprovider = "simulated"\ndescription = "{d}"\nmax_tokens = 64\n'
        f'price_input_per_m = 1.0\nprice_output_per_m = 2.0\noptions = {{ world = "{w}" }}\n' for n, w, d in workers))
    caps = list(CAPITALS.items())
    rows = [{"question": f"What is {a} plus {a + 3}?", "answer": str(2 * a + 3), "kind": "sums"} for a in range(10)]
    rows += [{"question": f"What is the capital of {c}?", "answer": city, "kind": "capitals"} for c, city in caps[:10]]
    rows += [{"question": f"What is {a} plus {2 * a}?", "answer": str(3 * a), "kind": "mixed"} for a in range(11, 16)]
    rows += [{"question": f"What is the capital of {c}?", "answer": city, "kind": "mixed"} for c, city in caps[10:]]
    (tmp / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tiny = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in TINY_LLAMA.items()) + " }"
    (tmp / "recipe.toml").write_text(f'pool = "default"\n[model]\nname = "{tiny_tokenizer(tmp / "tok")}"\ntiny = {tiny}\n'
                                     '[prompt]\nexamples = false\nfine_grained = false\nshow = "names"\nstyle = "compact"\n'
                                     '[warmup_sft]\nepochs = 1\nbatch_size = 4\nlearning_rate = 1e-3\nbare_share = 0.5\n'
                                     '[grpo]\nnum_generations = 4\nper_device_train_batch_size = 8\ngradient_accumulation_steps = 1\n'
                                     'learning_rate = 5e-3\nmax_completion_length = 16\nseed = 1\n'
                                     '[run]\nsave_steps = 1\nreport_to = []\ngguf = false\n')
    return {"pool": tmp / "pool.toml", "questions": tmp / "q.jsonl", "recipe": tmp / "recipe.toml"}


def _settings(tmp: Path, **extra) -> FitSettings:
    """The tiny random model is not meant to copy its targets (one epoch of a few steps): these tests check the
    machinery, so the fidelity bar is off unless a test sets it (test_fit_quality.py tests the bar)."""
    f = _files(tmp)
    extra.setdefault("fidelity_bar", 0.0)
    return FitSettings(pool=str(f["pool"]), out=tmp / "out", questions=f["questions"], per_task=6, eval_n=2, recipe=f["recipe"], **extra)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, world):
    """One finished fit at the default settings, shared: a test that starts from it copies its folder (``fitted``),
    which the fit takes as its own (test_a_fit_folder_copied_elsewhere_keeps_its_copy_and_grpo), and goes on there."""
    home = tmp_path_factory.mktemp("baseline")
    return home, run_fit(_settings(home))


def fitted(baseline, tmp_path: Path, **extra) -> tuple[FitSettings, "object"]:
    """Settings for a copy of the shared fit in ``tmp_path/out`` (its files stay the shared ones), and its result."""
    import shutil

    home, first = baseline
    shutil.copytree(home / "out", tmp_path / "out")
    return _settings(home, **extra).model_copy(update={"out": tmp_path / "out"}), first


def test_fit_end_to_end_on_a_simulated_pool(tmp_path, world):
    estimate = plan_fit(_settings(tmp_path))
    assert not (tmp_path / "out" / "replay.sqlite3").exists()  # the dry run called nothing
    capped = run_fit(_settings(tmp_path, max_calls=20))
    assert capped.stopped and "max_calls" in capped.stopped and capped.spend.calls == 20 and capped.checkpoint is None
    done = run_fit(_settings(tmp_path, grpo_steps=2))
    out = tmp_path / "out"
    assert done.stopped is None and (done.checkpoint / "openconductor.json").exists()
    manifest = json.loads((done.checkpoint / "openconductor.json").read_text())
    assert manifest["pool"]["workers"] == ["calc", "know"] and manifest["fit"]["targets"] == "per question"
    assert manifest["fit"]["from"] == "final" and manifest["fit"]["groups_best"]["sums"] == "single:calc"
    # What it trained on, for `[conductor] unfamiliar = "best-fixed"`: the questions, a threshold, the best fixed workflow.
    familiar = read_familiarity(done.checkpoint)
    assert familiar.data.fallback.name == manifest["fit"]["best_fixed"] and familiar.data.fallback.workers == ["calc", "know"]
    assert {q.group for q in familiar.data.questions} == {"sums", "capitals", "mixed"}
    assert read_familiarity(out / "train" / "warmup").threshold == familiar.threshold
    assert familiar.nearest("Decrypt this Caesar cipher text: YMJ XFNI RW.")[0] < familiar.threshold
    warm = json.loads((out / "train" / "warmup" / "openconductor.json").read_text())
    assert warm["selection"]["selection"].startswith("per question")
    # The copy records what it taught; GRPO's rollouts were free (the recipe's rollout.subtasks), so the final model is not held to it.
    taught = [json.loads(line)["target"] for line in (out / "train" / "warmup_targets.jsonl").read_text().splitlines()]
    assert warm["wordings"] == taught_wordings(taught) and len(warm["wordings"]) >= 1 and "wordings" not in manifest
    # Per-question targets: in the mixed kind the capital questions are taught the other worker than the kind's best.
    targets = json.loads((out / "targets.json").read_text())["groups"]
    assert targets["sums"]["best"] == "single:calc" and targets["capitals"]["best"] == "single:know"
    mixed = [q for q in targets["mixed"]["per_question"]]
    assert {q["target"] for q in mixed} == {"single:calc", "single:know"}
    assert all(q["target"] == ("single:know" if "capital" in q["question"] else "single:calc") for q in mixed)
    # The evaluation: every single worker, the best fixed workflow, the lookup table, both conductors, with intervals.
    report = (out / "eval" / "report.md").read_text()
    # ... and the conductor with its gate on (the pool file plans every question), paired with it in the "vs conductor" column.
    for row in ("single:calc", "single:know", "best fixed (", "lookup (per task)", "| conductor |", "conductor, copy only",
                "| conductor, unfamiliar = best-fixed |"):
        assert row in report
    assert re.search(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]", report)
    # The dry run's calls against what the fit paid (both invocations together): within 25 %.
    assert 0.75 <= done.spend.calls / estimate["total"]["calls"] <= 1.25
    # With the profile's measured output per call, the token estimate is within 25 % too.
    measured = plan_fit(_settings(tmp_path, grpo_steps=2))
    assert measured["output_tokens_per_call"] == "measured by the profile"
    assert 0.75 <= done.spend.tokens / measured["total"]["tokens"] <= 1.25
    again = run_fit(_settings(tmp_path, grpo_steps=2))  # every stage done: nothing runs, nothing is paid
    assert again.spend.calls == done.spend.calls and again.report == done.report
    assert set(json.loads((out / "fit.json").read_text())["stages"]) >= {"profile", "search", "targets", "copy", "grpo", "evaluate"}


def test_a_changed_setting_redoes_only_the_stages_it_decides(tmp_path, baseline):
    settings, _ = fitted(baseline, tmp_path, finalists=2)
    before = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    redone = run_fit(settings)  # the search's size: search and later stages again, replayed
    after = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    assert after["profile"] == before["profile"] and after["search"]["digest"] != before["search"]["digest"]
    assert all(len(g["finalists"]) == 2 for g in json.loads((tmp_path / "out" / "search.json").read_text())["groups"].values())
    assert redone.stopped is None and redone.spend.calls == json.loads((tmp_path / "out" / "fit.json").read_text())["spend"]["calls"]


def test_a_fit_folder_copied_elsewhere_keeps_its_copy_and_grpo(tmp_path, world):
    """Where a fit's files are written does not decide its copy: a finished fit copied to another folder (to branch a
    longer GRPO run off it) redoes nothing, there and on every later rerun; a folder whose copy was recorded under the
    digest that still held its path (fits before 2026-11-29) keeps it too."""
    import dataclasses
    import shutil

    from openconductor.train.fit import context as fitmod

    first = run_fit(_settings(tmp_path, grpo_steps=1))
    state = json.loads((tmp_path / "out" / "fit.json").read_text())
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "out", moved)
    warm = (moved / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns
    for _ in range(2):
        again = run_fit(_settings(tmp_path, grpo_steps=1).model_copy(update={"out": moved}))
        stages = json.loads((moved / "fit.json").read_text())["stages"]
        assert again.report == first.report and again.spend.calls == first.spend.calls
        assert {k: v["digest"] for k, v in stages.items()} == {k: v["digest"] for k, v in state["stages"].items()}
        assert (moved / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns == warm  # not copied again
    # A fit recorded before (its copy's digest held the folder's path) in one folder, then copied to another: the
    # copy and the stages after it are kept there, on the first rerun and on the next (the "recipe" field).
    settings = _settings(tmp_path, grpo_steps=1)
    recorded = json.loads((tmp_path / "out" / "fit.json").read_text())
    cfg = fitmod.recipe(settings, load_pool(settings.pool))  # as the old fit in tmp_path/out saw it
    before = recorded["stages"]["targets"]["digest"]
    old = fitmod.digest(before, dataclasses.asdict(cfg))
    assert old != fitmod.copy_digest(before, cfg)
    recorded["stages"]["copy"] = {"digest": old, "seconds": 1.0, "spend": {}}
    for later in ("grpo-started", "grpo"):
        recorded["stages"][later]["digest"] = fitmod.digest(old, 1)
    legacy = tmp_path / "legacy"
    shutil.copytree(tmp_path / "out", legacy)
    (legacy / "fit.json").write_text(json.dumps(recorded))
    warm = (legacy / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns
    for rerun in range(2):
        kept = run_fit(settings.model_copy(update={"out": legacy}))
        stages = json.loads((legacy / "fit.json").read_text())["stages"]
        assert kept.report == first.report and stages["copy"]["digest"] == old and stages["grpo"]["digest"] == fitmod.digest(old, 1)
        assert stages["copy"]["recipe"] == fitmod.copy_digest(before, cfg), rerun
        assert (legacy / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns == warm
    # Without its record the copy on disk is not trusted: it is made again, as is the copy of another recipe.
    (legacy / "fit.json").unlink()
    assert run_fit(settings.model_copy(update={"out": legacy})).stopped is None
    assert (legacy / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns != warm
    warm = (legacy / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns
    recipe_file = Path(settings.recipe)
    recipe_file.write_text(recipe_file.read_text().replace("learning_rate = 1e-3", "learning_rate = 2e-3"))
    run_fit(settings.model_copy(update={"out": legacy}))
    assert (legacy / "train" / "warmup" / "openconductor.json").stat().st_mtime_ns != warm


def test_a_fit_started_from_a_trained_conductor_copies_from_its_weights_and_a_bad_one_is_refused_before_any_call(tmp_path, baseline, caplog):
    """``--init``: the copy starts from a conductor's weights (recorded with their digest); only the copy and later
    stages are redone, the paid stages replayed. A directory without trained weights, or an adapter of another LoRA
    shape than the recipe's, is refused by the command before anything is spent."""
    import hashlib
    import shutil

    from typer.testing import CliRunner

    from openconductor.cli import app

    settings, first = fitted(baseline, tmp_path, init=str(tmp_path / "first"))
    shutil.copytree(first.checkpoint, tmp_path / "first")
    weights = tmp_path / "first" / "model.safetensors"
    before = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    with caplog.at_level("INFO"):
        again = run_fit(settings)
    after = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    assert f"loaded the weights of {tmp_path / 'first'}" in caplog.text
    assert after["search"] == before["search"] and after["copy"]["digest"] != before["copy"]["digest"]
    # Nothing paid twice: the only new calls are the new conductor's plans in the evaluation.
    assert again.spend.calls - first.spend.calls == after["evaluate"]["spend"].get("calls", 0)
    record = json.loads((tmp_path / "out" / "train" / "warmup" / "openconductor.json").read_text())["init"]
    assert record == {"path": str(tmp_path / "first"), "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    f = _files(tmp_path)
    (tmp_path / "empty").mkdir()
    base = ["fit", str(f["pool"]), "--questions", str(f["questions"]), "--recipe", str(f["recipe"]), "--out", str(tmp_path / "o2")]
    bad = CliRunner().invoke(app, [*base, "--init", str(tmp_path / "empty"), "--dry-run"])
    said = " ".join(bad.output.split())  # the console wraps long lines
    assert bad.exit_code != 0 and "model.init" in said and "no trained conductor there" in said
    lora_recipe = tmp_path / "lora.toml"
    lora_recipe.write_text(f["recipe"].read_text().replace("[prompt]", 'lora = { r = 4, alpha = 8, target_modules = ["q_proj"], layers = [0] }\n[prompt]'))
    bad = CliRunner().invoke(app, [*base[:-4], "--recipe", str(lora_recipe), "--out", str(tmp_path / "o2"), "--init", "builtin:local-tools"])
    assert bad.exit_code != 0 and "differ (r: 16 there, 4 here" in " ".join(bad.output.split())
    assert not (tmp_path / "o2").exists()


def test_a_change_in_scoring_redoes_the_stages_from_the_store(tmp_path, baseline, monkeypatch):
    """Stages ranked by score are redone when the graders score differently (graders.SCORING_VERSION), replayed
    from the store: an upgrade never keeps a ranking the old scores made, and pays nothing again."""
    from openconductor import graders

    settings, first = fitted(baseline, tmp_path)
    before = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    monkeypatch.setattr(graders, "SCORING_VERSION", graders.SCORING_VERSION + 1)
    again = run_fit(settings)
    after = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    assert all(after[s]["digest"] != before[s]["digest"] for s in ("profile", "search", "targets", "copy"))
    assert again.spend.calls == first.spend.calls  # every worker call replayed


def test_the_candidates_come_from_the_pool():
    spec = load_default_pool()
    names = [c.name for c in candidate_set(spec, 3)]
    assert names[:4] == ["pool:code-then-run", "pool:code-run-answer", "pool:search-then-run", "pool:answer-then-check"]
    assert {"single:qwen-coder", "single:smollm2"} <= set(names) and any(n.startswith("code-run-answer-") for n in names)
    # A model far below the strongest on the profile answers alone only; plans longer than max_steps are left out.
    weak = [c.name for c in candidate_set(spec, 3, {"qwen-coder": 0.4, "smollm2": 0.05})]
    assert "single:smollm2" in weak and not any("smollm2" in n for n in weak if not n.startswith("single:"))
    assert all(len(c.workflow.steps) <= 2 for c in candidate_set(spec, 2))


def test_a_pool_workflow_the_conductor_cannot_write_is_named_with_the_reason_not_dropped_silently(tmp_path, world):
    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.train.fit.state import Hooks
    from openconductor.train.fit.context import candidates_for, context

    settings = _settings(tmp_path, max_calls=1)
    declared = {"short": (["Add the numbers."], '"all"'), "twin": (["Add the numbers."], '"all"'), "wordy": (["Add the numbers. " * 6], '"all"'),
                "long": (["Add.", "Check.", "Answer."], '"all"'), "picky": (["Add the numbers.", "Check it."], "[0]")}
    with open(settings.pool, "a") as pool:
        for name, (subtasks, access) in declared.items():
            pool.write(f"[workflows.{name}]\ndescription = \"{name}\"\nsteps = [\n" + "".join(
                f'  {{ worker = "calc", subtask = "{t}", access = {"[]" if i == 0 else access} }},\n' for i, t in enumerate(subtasks)) + "]\n")
    with open(settings.recipe, "a") as recipe:
        recipe.write("[rollout]\nconstrained = true\nreason_chars = 96\nsubtask_chars = 72\n")

    class Notes(Hooks):
        def __init__(self):
            self.said: list[str] = []

        def note(self, text):
            self.said.append(text)

    hooks = Notes()
    run_fit(settings, hooks)  # the fit says it before its first call (the cap then stops it)
    expected = ["[workflows.twin] is left out of the search's candidates because it has the same steps as [workflows.short], searched as pool:short",
                "[workflows.wordy] is left out of the search's candidates because step 1's subtask has 101 characters and the conductor writes 3 to 72",
                "[workflows.long] is left out of the search's candidates because it has 3 steps and the conductor writes at most 2",
                "[workflows.picky] is left out of the search's candidates because step 2 sees chosen steps [0] and this conductor writes only [] or \"all\""]
    assert hooks.said == expected
    names = [c.name for c in candidates_for(context(settings), None)]
    assert "pool:short" in names and not {"pool:twin", "pool:wordy", "pool:long", "pool:picky"} & set(names)
    assert plan_fit(settings)["left_out"] == expected  # the dry run says it before anything is spent
    shown = CliRunner().invoke(app, ["fit", str(settings.pool), "--questions", str(settings.questions), "--recipe", str(settings.recipe),
                                     "--out", str(tmp_path / "dry"), "--dry-run"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["left_out"] == expected  # stdout is not a terminal here: one JSON object


def test_the_output_format_says_which_of_its_rules_a_plan_breaks():
    from openconductor.workflow import Step, Workflow, WorkflowFormat

    fmt = WorkflowFormat(3, 2, reason_chars=20, subtask_chars=30, fine_grained=True)
    ok = Workflow((Step(0, "Add the numbers.", ()), Step(1, "Check it.", (0,))), reasoning="Reasoning: add then check")
    assert fmt.why_not(ok) is None and fmt.complete(fmt.advance(fmt.start(), ok.render()))
    cases = {
        Workflow((Step(0, "Go", ()),), "Reasoning: short"): "step 1's subtask has 2 characters and the conductor writes 3 to 30",
        Workflow((Step(0, "Add the numbers.", ()),), "Reasoning: " + "x" * 21): "its reasoning line (written from its description) has 21 characters",
        Workflow((Step(0, 'Say "hi".', ()),), "Reasoning: quote"): 'characters the conductor cannot write ("; quotes',
        Workflow((Step(0, "Add.", "all"),), "Reasoning: first"): "step 1 sees earlier steps, and there are none",
        Workflow((Step(0, "Add.", ()), Step(1, "Check.", (1,))), "Reasoning: self"): "step 2 sees steps [1], not all of them earlier",
        Workflow((Step(5, "Add.", ()),), "Reasoning: who"): "step 1 names worker id 5 and the pool has 3 workers",
    }
    for plan, why in cases.items():
        assert why in (fmt.why_not(plan) or ""), plan
        assert not fmt.complete(fmt.advance(fmt.start(), plan.render()))  # each is a plan the format refuses


def test_bad_input_is_a_typed_error_that_says_what_to_do(tmp_path, world):
    f = _files(tmp_path)
    with pytest.raises(FitDataError, match="not both"):
        plan_fit(_settings(tmp_path, tasks=["basic_arithmetic"]))
    with pytest.raises(FitDataError, match="never sees"):
        plan_fit(FitSettings(pool=str(f["pool"]), out=tmp_path / "o", tasks=["basic_arithmetic"], eval_tasks=["basic_arithmetic"],
                             recipe=f["recipe"]))
    with pytest.raises(FitDataError, match="--eval-n 1 or more"):
        plan_fit(FitSettings(pool=str(f["pool"]), out=tmp_path / "o", tasks=["basic_arithmetic"], eval_tasks=["rg:lcm"], eval_n=0,
                             recipe=f["recipe"]))
    (tmp_path / "tools.toml").write_text('name = "tools"\n[[workers]]\nname = "py"\nprovider = "python"\n')
    with pytest.raises(TrainConfigError, match="no model"):
        plan_fit(FitSettings(pool=str(tmp_path / "tools.toml"), out=tmp_path / "o", questions=f["questions"], recipe=f["recipe"]))
    assert load_pool(f["pool"]).name == "fit-sim"


def test_a_pool_too_small_for_the_copys_wordings_is_refused_before_grpo_and_a_rerun_goes_on_from_the_copy(tmp_path, world):
    """The runtime holds a fitted conductor to its copy's wordings; a ``[conductor] max_tokens`` that leaves a subtask
    less room than the longest of them would refuse every plan. The fit says so after the copy, before GRPO and the
    evaluation spend anything, names the max_tokens that fits, and a rerun with it goes on from the copy."""
    from openconductor.pool import PoolConfigError
    from openconductor.workflow import WorkflowFormat

    settings = _settings(tmp_path, grpo_steps=1)
    with pytest.raises(ValueError, match="raise it to at least") as small:  # the least budget that leaves 24 characters a subtask
        WorkflowFormat.bounded(2, 2, 40, names=("calc", "know"))
    least_room = int(re.search(r"at least (\d+)", str(small.value)).group(1))
    pool = Path(settings.pool)
    pool.write_text(pool.read_text().replace("max_steps = 2\n", f"max_steps = 2\nmax_tokens = {least_room}\n"))
    with pytest.raises(PoolConfigError, match="trained wording has") as refused:
        run_fit(settings)
    assert "edit the pool file and run the same command again" in str(refused.value)
    stages = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    assert "copy" in stages and "grpo" not in stages and not (tmp_path / "out" / "eval").exists()
    enough = int(re.search(r"raise it to at least (\d+)", str(refused.value)).group(1))
    pool.write_text(pool.read_text().replace(f"max_tokens = {least_room}", f"max_tokens = {enough}"))
    done = run_fit(settings)
    after = json.loads((tmp_path / "out" / "fit.json").read_text())["stages"]
    # the copy is not made again (its fidelity, measured now, is added to its record)
    assert done.stopped is None and {k: after["copy"][k] for k in stages["copy"]} == stages["copy"] and after["search"] == stages["search"]
    assert (tmp_path / "out" / "eval" / "report.md").exists()


@pytest.mark.slow
def test_fit_on_the_real_offline_pool_with_a_tiny_budget(tmp_path):
    """The real offline pool (Qwen2.5-Coder-0.5B, SmolLM2-135M, the python tool in the sandbox) and the real
    conductor model (SmolLM2-135M + LoRA), with the smallest budget that runs every stage: two tasks, two
    training questions each, one finalist, one held-out question each. Minutes on 2 cores."""
    recipe = tmp_path / "recipe.toml"
    from importlib import resources

    text = Path(str(resources.files("openconductor").joinpath("data/fit_recipe.toml"))).read_text()
    recipe.write_text(text.replace("epochs = 4", "epochs = 1"))
    settings = FitSettings(pool="default", out=tmp_path / "out", tasks=["basic_arithmetic", "rg:letter_counting"], per_task=2, profile_n=1,
                           screen_rounds=1, finalists=1, eval_n=1, recipe=recipe, max_calls=400)
    estimate = plan_fit(settings)
    result = run_fit(settings)
    assert result.stopped is None and (result.checkpoint / "conductor.gguf").exists()
    assert "lookup (per task)" in result.report and "single:qwen-coder" in result.report
    assert 0 < result.spend.calls <= estimate["total"]["calls"]


def test_the_evaluation_questions_decide_only_the_evaluation():
    from openconductor.train.data import Item
    from openconductor.train.fit.questions import FitQuestions

    train = [Item(question="2+2?", reference="4", task="basic_arithmetic", domain="sums")]
    few = FitQuestions(train, held_out=[Item(question="3+3?", reference="6", task="basic_arithmetic", domain="sums")])
    more = FitQuestions(train, held_out=few.held_out + [Item(question="4+4?", reference="8", task="basic_arithmetic", domain="sums")])
    # Another --eval-n keeps the training stages' digest (nothing is retrained) and changes the evaluation's.
    assert few.digest() == more.digest() and few.eval_digest() != more.eval_digest()
    assert FitQuestions(train + more.held_out[:1], held_out=[]).digest() != few.digest()


def test_local_threads_change_speed_settings_only_and_keep_the_fit_and_eval_digests():
    """The fit runs the pool's llama.cpp models on every core; that must not make finished stages or an
    evaluation folder look as if they were made with another pool."""
    from openconductor.evaluation.setup import eval_setup
    from openconductor.budget import Limits
    from openconductor.train.fit.context import pool_digest

    spec = load_default_pool()
    fast = spec.with_local_threads(2)
    local = [w for w in fast.all_workers() if w.provider == "local_gguf"]
    assert local and all(w.options["threads"] == 2 and w.options["threads_batch"] == 2 for w in local)
    assert [w.options for w in fast.workers if w.provider != "local_gguf"] == [w.options for w in spec.workers if w.provider != "local_gguf"]
    assert pool_digest(fast) == pool_digest(spec)
    assert eval_setup([], [], fast, seed=0, limits=Limits()).pool_digest == eval_setup([], [], spec, seed=0, limits=Limits()).pool_digest
    from openconductor.policies import make_policy

    conductor = make_policy("conductor")
    assert fast.conductor.backend.options["threads"] == 2 and conductor.fingerprint(fast) == conductor.fingerprint(spec)
    longer = spec.model_copy(update={"workers": [spec.workers[0].model_copy(update={"max_tokens": 99}), *spec.workers[1:]]})
    assert pool_digest(longer) != pool_digest(spec)


def test_each_finished_stage_is_on_disk_before_the_next_starts(tmp_path, world):
    """A fit killed mid-stage (SIGTERM, a lost machine) keeps the stages it finished: fit.json is written as
    each one ends, not only when the fit does."""
    from openconductor.train.fit.state import Hooks

    out = tmp_path / "out"
    on_disk: dict[str, set] = {}

    class Watch(Hooks):
        def stage(self, name, total):
            path = out / "fit.json"
            on_disk[name] = set(json.loads(path.read_text())["stages"]) if path.exists() else set()

    run_fit(_settings(tmp_path), Watch())
    assert on_disk["profile"] == set() and on_disk["search"] >= {"profile"} and on_disk["targets"] >= {"profile", "search"}
    assert on_disk["evaluate"] >= {"profile", "search", "targets", "copy"}


def test_the_fit_reports_each_stage_in_a_log_file(tmp_path, world):
    """Without a terminal (output sent to a file) the live bars draw nothing: one line per stage instead."""
    import io

    from rich.console import Console

    from openconductor.train.fit.progress import RichHooks

    buffer = io.StringIO()
    with RichHooks(Console(file=buffer, force_terminal=False)) as hooks:
        run_fit(_settings(tmp_path, grpo_steps=2), hooks)
    log = buffer.getvalue()
    assert re.search(r"grpo: 2 done in \d+ s", log)  # GRPO's steps count (it said "0 done" after 40 steps)
    for name in ("profile", "search", "targets", "evaluate"):
        assert re.search(rf"\d\d:\d\d:\d\d {name}: started", log) and re.search(rf"{name}: [\d,]+ done in \d+ s", log)
    assert re.search(r"copy: done in \d+ s", log)


def test_a_stage_without_a_count_stops_its_clock_when_it_ends():
    """The copy has no count of runs: its bar kept its clock running through the evaluation after it ended."""
    import io

    from rich.console import Console

    from openconductor.train.fit.progress import RichHooks

    with RichHooks(Console(file=io.StringIO(), force_terminal=False)) as hooks:
        hooks.stage("copy", None)
        hooks.stage("evaluate", 3)
        hooks.advance(2)
        copy, evaluate = hooks.progress.tasks
        assert copy.finished and copy.stop_time is not None
        frozen = copy.elapsed
        time.sleep(0.05)
        assert copy.elapsed == frozen
    assert evaluate.completed == 2 and evaluate.total == 2 and evaluate.finished  # an ended count stage shows what it did


def test_the_exact_form_wording_cut_for_the_fit_is_a_candidate_and_the_probed_one_is_not(tmp_path):
    """examples/workflows/code-exact-fit.toml exists to be searched by the fit (docs/fit.md); code-exact.toml's
    subtask is longer than the fit recipe's bound, which the fit says rather than dropping it silently."""
    from openconductor.train.fit.context import candidates_for, context, left_out_notes

    root = Path(__file__).resolve().parents[1]
    pool = (root / "src" / "openconductor" / "data" / "local_pool.toml").read_text()
    for name in ("code-exact-fit", "code-exact"):
        body = (root / "examples" / "workflows" / f"{name}.toml").read_text()
        pool += f"\n[workflows.{name}]\n" + body[body.index("description"):]
    (tmp_path / "pool.toml").write_text(pool)
    ctx = context(FitSettings(pool=str(tmp_path / "pool.toml"), out=tmp_path / "out", eval_n=0))
    names = [c.name for c in candidates_for(ctx, None)]
    assert "pool:code-exact-fit" in names and "pool:code-exact" not in names
    assert left_out_notes(ctx) == ["[workflows.code-exact] is left out of the search's candidates because step 1's subtask has 332 characters "
                                   "and the conductor writes 3 to 280"]
