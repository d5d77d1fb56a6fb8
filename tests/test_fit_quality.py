"""A fit that cannot ship a bad conductor (issue 69): copy fidelity and its bar, too-small copies named, the lookup
shipped when the conductor does not beat it, the report's reading guide and the model card; and the fit's
ergonomics: Ctrl-C marks the stage interrupted, JSON lines without a terminal, the dry run's time.

The fits here run on the SIMULATED two-worker pool of test_fit.py (mock workers, labelled there) with a tiny
random conductor model: they check the machinery and its decisions, not the quality of a real copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
sys.path.insert(0, str(Path(__file__).parent))

from test_fit import _files, _settings, world  # noqa: E402,F401  (world: the SIMULATED workers' fixture)

from openconductor.evaluation import EvalRecord  # noqa: E402
from openconductor.train.fit import copy as fitcopy  # noqa: E402
from openconductor.train.fit.state import Hooks  # noqa: E402
from openconductor.train.fit.run import run_fit  # noqa: E402
from openconductor.train.fit.copy import CopyPlan, Fidelity, fidelity_of, same_plan  # noqa: E402
from openconductor.train.fit.ship import SHIPPED_LABEL, decide  # noqa: E402

CALC = 'Reasoning: one agent answers.\nmodel_id = [0]\nsubtasks = ["Answer the question."]\naccess_list = [[]]'
KNOW = CALC.replace("model_id = [0]", "model_id = [1]")
CHAIN = ('Reasoning: solve, then check.\nmodel_id = [0, 1]\nsubtasks = ["Answer the question.", "Check the answer above."]\n'
         'access_list = [[], "all"]')


def test_fidelity_counts_a_plan_only_when_its_workers_subtasks_and_access_are_the_targets():
    assert same_plan(CALC, CALC) and same_plan(CALC.replace("one agent answers", "calc alone"), CALC)  # the reasoning line is free
    assert not same_plan(KNOW, CALC)  # another worker
    assert not same_plan(CALC.replace("Answer the question.", "Solve it."), CALC)  # another subtask
    assert not same_plan(CHAIN.replace('"all"', "[]"), CHAIN)  # the check step no longer sees the answer
    assert same_plan(CHAIN.replace('"all"', "[0]"), CHAIN)  # [0] is "all" for the second step
    assert not same_plan("model_id = [0", CALC) and not same_plan("", CALC)  # no plan is no copy
    fid = fidelity_of(["sums", "sums", "capitals"], ["q1", "q2", "q3"], [CALC, CALC, KNOW], [CALC, KNOW, KNOW], epochs=4)
    assert (fid.matched, fid.n, fid.per_group) == (2, 3, {"sums": (1, 2), "capitals": (1, 1)})
    assert fid.share == pytest.approx(2 / 3) and [m.question for m in fid.misses] == ["q2"]


def test_a_copy_too_small_to_learn_from_is_named_with_what_to_raise():
    # The copy: 6 targets of one kind, batch 8, 4 epochs: 4 optimiser steps.
    small = CopyPlan({"questions": 6}, epochs=4, batch_size=8, learning_rate=1e-3)
    said = " ".join(small.warnings())
    assert small.steps == 4 and "4 optimiser steps" in said and "--copy-epochs to 20" in said
    few = CopyPlan({"sums": 2, "capitals": 8}, epochs=4, batch_size=8, learning_rate=1e-3)
    assert "too few targets" in few.warnings()[0] and "sums 2" in few.warnings()[0] and "--per-task" in few.warnings()[0]
    assert CopyPlan({g: 8 for g in "abcdefghij"}, epochs=4, batch_size=8, learning_rate=1e-3).warnings() == []  # the offline default
    text = fitcopy.advice(Fidelity(matched=0, n=6, per_group={"questions": (0, 6)}, epochs=4), small, 0.95, 12)
    for named in ("0 of 6", "under the bar of 95%", "--copy-epochs", "--max-copy-epochs (now 12)", "--copy-lr (now 0.001)", "--fidelity-bar"):
        assert named in text, named


def _records(policy: str, right: list[int]) -> list[EvalRecord]:
    return [EvalRecord(task="held-out", policy=policy, question_id=str(i), repeat=0, question=f"q{i}", run_id=f"{policy}{i}", seed=0,
                       status="ok", final_answer="", correct=bool(c), score=float(c), steps=1, calls=1, tokens=10, worker_tokens=10,
                       conductor_tokens=0, cost_usd=0.0, wall_s=0.1) for i, c in enumerate(right)]


def test_the_fit_ships_the_lookup_when_the_conductor_does_not_beat_it(tmp_path):
    lookup = [1, 1, 0, 1, 0, 1, 1, 0]
    base = _records(SHIPPED_LABEL, lookup) + _records("lookup (per task)", lookup) + _records("single:calc", [1, 0, 0, 1, 0, 0, 1, 0])
    worse = decide(base + _records("conductor", [0, 1, 0, 1, 0, 0, 1, 0]), "conductor", tmp_path / "lookup.yaml", tmp_path / "c", 1.0)
    assert worse.ship == "lookup" and "does not beat the per-task lookup" in worse.why
    assert worse.vs_lookup.mean == pytest.approx(-2 / 8) and worse.vs_lookup.low < 0 and worse.vs_best_single.against == "single:calc"
    tie = decide(base + _records("conductor", lookup), "conductor", tmp_path / "lookup.yaml", tmp_path / "c", 1.0)
    assert tie.ship == "lookup"  # equal is not better: the lookup plans exactly, with no model to run
    better = decide(base + _records("conductor", [1, 1, 1, 1, 1, 1, 1, 0]), "conductor", tmp_path / "lookup.yaml", tmp_path / "c", 1.0)
    assert better.ship == "conductor" and better.vs_lookup.mean == pytest.approx(2 / 8) and "beats the lookup" in better.why


@pytest.mark.heavy  # three fits and two `conductor ask` runs: about 90 s on 2 shared cores
def test_a_copy_under_the_bar_copies_on_then_is_not_called_done_and_a_rerun_goes_on(tmp_path, world):  # noqa: F811
    """The tiny model cannot write a whole plan in its 16 tokens: fidelity 0, under any bar. The fit copies on to the
    cap, then stops before GRPO and the evaluation, names what to raise, places no conductor and offers the lookup."""
    from typer.testing import CliRunner

    from openconductor.cli import app

    settings = _settings(tmp_path, fidelity_bar=0.95, max_copy_epochs=2, grpo_steps=1)
    refused = run_fit(settings)
    out = tmp_path / "out"
    stages = json.loads((out / "fit.json").read_text())["stages"]
    assert refused.refused and refused.checkpoint is None and not (out / "conductor").exists() and "grpo" not in stages
    assert "under the bar of 95%" in refused.refused and "--copy-epochs" in refused.refused and "optimiser steps" in refused.refused
    assert stages["copy"]["epochs"] == 2 and stages["copy"]["fidelity"] == 0.0  # the recipe's 1 epoch, then 1 more
    fid = Fidelity.model_validate_json((out / "fidelity.json").read_text())
    assert fid.n == 18 and fid.epochs == 2 and "### copy fidelity" in refused.report and "0 of 18" in refused.report
    warm = (out / "train" / "warmup" / "adapter_model.safetensors")
    warm = warm if warm.exists() else out / "train" / "warmup" / "model.safetensors"
    stamp = warm.stat().st_mtime_ns
    again = run_fit(settings)  # at the cap already: nothing copied or measured again, the same answer
    assert again.refused == refused.refused and warm.stat().st_mtime_ns == stamp
    more = run_fit(settings.model_copy(update={"max_copy_epochs": 3}))  # a higher cap goes on from the copy it has
    assert json.loads((out / "fit.json").read_text())["stages"]["copy"]["epochs"] == 3 and more.refused
    # The lookup is written all the same, and `conductor ask` runs it exactly: a question like the sums runs the sums'
    # plan (calc), one like the capitals the capitals' (know), one like none of them the best fixed workflow.
    table = out / "lookup" / "lookup.yaml"
    assert more.lookup == table and (out / "lookup" / "familiar.json").exists()
    for question, answer in (("What is 40 plus 43?", "83"), ("What is the capital of Peru?", "Lima")):
        asked = CliRunner().invoke(app, ["ask", "--pool", str(settings.pool), "--policy", f"lookup:{table}", "--json", "--no-trace", question])
        assert asked.exit_code == 0, asked.output
        run = json.loads(asked.output)
        assert run["final_answer"].endswith(answer) and run["plan"]["familiarity"]["gated"] is False


def test_a_copy_that_reaches_the_bar_goes_on_and_the_fit_says_what_it_ships(tmp_path, world, monkeypatch):  # noqa: F811
    """Fidelity measured under the bar, then over it after one more round (measured by a stand-in here: the tiny
    model writes no whole plan): the fit evaluates, decides, and writes the report, the verdict and the model card."""
    shares = iter([(1, 18), (18, 18)])

    def measured(ctx, checkpoint, epochs):
        m, n = next(shares)
        return Fidelity(matched=m, n=n, per_group={"sums": (m, n)}, epochs=epochs)

    monkeypatch.setattr(fitcopy, "measure", measured)
    done = run_fit(_settings(tmp_path, fidelity_bar=0.9))
    out = tmp_path / "out"
    assert done.refused is None and done.checkpoint is not None
    assert json.loads((out / "fit.json").read_text())["stages"]["copy"]["epochs"] == 2
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["ship"] in ("conductor", "lookup") and verdict["vs_lookup"]["against"] == SHIPPED_LABEL
    assert verdict["vs_best_single"]["against"].startswith("single:") and verdict["fidelity"] == 1.0
    report = (out / "report.md").read_text()
    for part in ("### what the fit ships", "### copy fidelity", "### the search, on training questions", "### how to read this report",
                 "mean reward", "is not accuracy", f"| {SHIPPED_LABEL} |"):
        assert part in report, part
    card = (done.checkpoint / "README.md").read_text()
    assert "conductor for pool" in card and '"fidelity_bar": 0.9' in card and "### what the fit ships" in card and "calc, know" in card
    if verdict["ship"] == "lookup":
        assert "Not recommended for this pool" in card


def test_ctrl_c_marks_the_stage_interrupted_and_a_rerun_goes_on_from_it(tmp_path, world):  # noqa: F811
    import io
    import re

    from rich.console import Console

    from openconductor.train.fit.progress import RichHooks

    class CtrlC(RichHooks):
        def advance(self, n):
            super().advance(n)
            if self.progress.tasks[self.current].description == "search":
                raise KeyboardInterrupt

    buffer = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with CtrlC(Console(file=buffer, force_terminal=False)) as hooks:
            run_fit(_settings(tmp_path), hooks)
    state = json.loads((tmp_path / "out" / "fit.json").read_text())
    assert state["interrupted"]["stage"] == "search" and "search" not in state["stages"] and "profile" in state["stages"]
    log = buffer.getvalue()
    assert re.search(r"search: interrupted after \d+ s", log) and not re.search(r"search: [\d,]+ done", log)

    class Notes(Hooks):
        said: list[str] = []

        def note(self, text):
            self.said.append(text)

    hooks = Notes()
    again = run_fit(_settings(tmp_path), hooks)
    assert again.checkpoint is not None and any("search: going on from its interruption" in t for t in hooks.said)
    state = json.loads((tmp_path / "out" / "fit.json").read_text())
    assert "interrupted" not in state and "search" in state["stages"]


@pytest.mark.parametrize("targets, epochs, measured_s", [(2, 1, 191.3), (12, 4, 235.1), (12, 4, 272.3), (160, 4, 810.0)])
def test_the_copy_estimate_is_within_a_quarter_of_the_measured_copies(targets, epochs, measured_s):
    """The dry run's copy time (one round, batch 8) against the copies it was fitted to (timing.py; results.md [50], [57],
    docs/fit.md): seconds per target and epoch alone had the 2-target copy at 3 s of 191 and [50]'s at 61 of 235."""
    from openconductor.train.fit.timing import copy_seconds

    copy, fidelity, _ = copy_seconds(Path("/nonexistent"), targets, epochs, 8)
    assert abs(copy / measured_s - 1) <= 0.25 and fidelity == targets * 10.0


def test_a_folder_that_copied_before_times_the_copy_by_its_own_steps(tmp_path):
    from openconductor.train.fit.timing import COPY_START_S, copy_seconds

    # two rounds of 4 epochs over 12 targets (16 steps), 507 s in all: two starts, then 7.9 s a step
    (tmp_path / "fit.json").write_text(json.dumps({"stages": {"copy": {"seconds": 507.4, "targets": 12, "epochs": 8}}}))
    copy, _, source = copy_seconds(tmp_path, 24, 4, 8)
    assert copy == pytest.approx(COPY_START_S + 12 * (507.4 - 2 * COPY_START_S) / 16) and "this folder" in source


def test_without_a_terminal_the_fit_prints_json_lines_and_the_dry_run_estimates_time(tmp_path, world):  # noqa: F811
    from typer.testing import CliRunner

    from openconductor.cli import app

    f = _files(tmp_path)
    base = ["fit", str(f["pool"]), "--questions", str(f["questions"]), "--recipe", str(f["recipe"]), "--per-task", "6", "--eval-n", "2"]
    dry = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "dry"), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    [plan] = [json.loads(line) for line in dry.output.splitlines()]  # one JSON object, no table
    assert plan["event"] == "dry_run" and plan["time"]["total_seconds"] is None and "--calibrate" in plan["time"]["calls_timed"]
    timed = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "dry"), "--dry-run", "--calibrate"])
    plan = json.loads(timed.output)
    assert set(plan["time"]["seconds_per_call"]) == {"calc", "know"} and plan["time"]["total_seconds"] is not None
    assert all(v is not None for v in plan["time"]["seconds"].values()) and plan["time"]["seconds"]["copy"] > 0
    assert (tmp_path / "dry" / "replay.sqlite3").exists()  # the calibration's calls are in the store the fit replays
    capped = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "run"), "--max-calls", "10"])
    lines = [json.loads(line) for line in capped.output.splitlines()]  # every line is JSON: no bars, no wrapped commands
    assert capped.exit_code == 3 and lines[-1]["event"] == "result" and lines[-1]["status"] == "stopped"
    assert any(e["event"] == "stage" and e["stage"] == "profile" for e in lines)


def test_a_copy_interrupted_between_epochs_goes_on_from_the_last_one(tmp_path, world, monkeypatch):  # noqa: F811
    """The issue's Ctrl-C during the copy: its rerun redid the whole copy. Each epoch is saved as it ends, so the
    rerun trains only the epochs left (the manifest's losses are those of the second epoch's batches alone)."""
    saved = fitcopy.save_epoch

    def then_ctrl_c(model, partial, state, epochs):
        saved(model, partial, state, epochs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fitcopy, "save_epoch", then_ctrl_c)
    settings = _settings(tmp_path, copy_epochs=2)
    with pytest.raises(KeyboardInterrupt):
        run_fit(settings)
    out = tmp_path / "out"
    state = json.loads((out / "fit.json").read_text())
    assert state["interrupted"]["stage"] == "copy" and state["stages"]["copy-started"]["epochs"] == 1 and "copy" not in state["stages"]
    monkeypatch.setattr(fitcopy, "save_epoch", saved)

    class Notes(Hooks):
        said: list[str] = []

        def note(self, text):
            self.said.append(text)

    hooks = Notes()
    done = run_fit(settings, hooks)
    assert done.checkpoint is not None and any("going on from epoch 1 of 2" in t for t in hooks.said)
    manifest = json.loads((out / "train" / "warmup" / "openconductor.json").read_text())
    assert len(manifest["warmup_losses"]) == 5  # 18 targets in batches of 4: one epoch's batches, not two
    state = json.loads((out / "fit.json").read_text())
    assert "copy-started" not in state["stages"] and not (out / "train" / "warmup.partial").exists() and "interrupted" not in state


def test_a_lookup_file_with_a_familiarity_gives_a_question_without_a_kind_its_nearest_kinds_plan(tmp_path):
    """What `conductor ask --policy lookup:FILE` and a server preset (policy = "lookup") run: no kind comes with the
    question, so a familiar one takes its nearest training kind's entry, an unfamiliar one the default."""
    import yaml

    from openconductor.policies import make_policy
    from openconductor.policies.base import PlanRequest
    from openconductor.conductor.familiar import Fallback, Familiarity

    sums = [f"What is {a} plus {a + 3}?" for a in range(8)]
    caps = [f"What is the capital of {c}?" for c in ("France", "Spain", "Italy", "Peru", "Chile", "Japan", "Kenya", "Cuba")]
    fallback = Fallback(name="single:calc", workflow=CALC, workers=["calc", "know"])
    Familiarity.build(sums + caps, ["sums"] * 8 + ["capitals"] * 8, fallback).write(tmp_path)
    step = {"subtask": "Answer the question.", "access": []}
    (tmp_path / "lookup.yaml").write_text(yaml.safe_dump({"domains": {"sums": {"steps": [{"worker": "calc", **step}]},
                                                                      "capitals": {"steps": [{"worker": "know", **step}]}},
                                                          "default": {"steps": [{"worker": "calc", **step}]}, "familiar": "."}))
    policy = make_policy("lookup", table=str(tmp_path / "lookup.yaml"))

    def kind(question: str, **known):
        return policy.nearest_kind(PlanRequest(question=question, pool=None, **known))

    assert kind("What is the capital of Norway?")[0] == "capitals" and kind("What is 40 plus 43?")[0] == "sums"
    unfamiliar, check = kind("Decrypt this Caesar cipher text: YMJ XFNI RW.")
    assert unfamiliar is None and check.gated  # the default: the best fixed workflow
    assert kind("What is 1 plus 2?", domain="capitals") == (None, None)  # a kind the caller knows is used as it is
