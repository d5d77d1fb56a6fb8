"""Closed wordings: a trained conductor's manifest records the subtasks its warm-up taught, and the pool's
``[conductor] subtasks = "trained"`` (the default) holds it to those, whole, in the GBNF grammar and in the
token automaton alike, so it chooses an instruction and cannot splice two into one."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from openconductor.workflow import WorkflowFormat, parse

ROOT = Path(__file__).resolve().parents[1]
WORDINGS = ("Write a Python program that prints: Final answer: <result>.", "Run the program.", "Run the program, then check it.",
            "Solve the task and give the final answer.")


def plan(*subtasks: str) -> str:
    ids = ", ".join("0" for _ in subtasks)
    texts = ", ".join(f'"{s}"' for s in subtasks)
    access = ", ".join(["[]"] + ['["all"]'] * (len(subtasks) - 1))
    return f"Reasoning: a plan.\nmodel_id = [{ids}]\nsubtasks = [{texts}]\naccess_list = [{access}]"


def closed(**kw) -> WorkflowFormat:
    return WorkflowFormat(3, 3, subtask_chars=120, wordings=WORDINGS, **kw)


def test_only_whole_wordings_are_admitted():
    fmt = closed()
    for text in (plan(WORDINGS[0], WORDINGS[1]), plan(WORDINGS[2]), plan(WORDINGS[3], WORDINGS[3], WORDINGS[1])):
        assert fmt.complete(fmt.advance(fmt.start(), text)) and fmt.why_not(parse(text)) is None
    spliced = plan("Run the program. Solve the task and give the final answer.")
    cut = plan("Run the program")  # a prefix of two wordings, whole of neither
    free = plan("Answer the question.")
    for text in (spliced, cut, free):
        assert fmt.advance(fmt.start(), text) is None or not fmt.complete(fmt.advance(fmt.start(), text))
        assert "none of the 4 wordings this conductor writes" in fmt.why_not(parse(text))
    # Free text is still free without wordings.
    assert WorkflowFormat(3, 3, subtask_chars=120).why_not(parse(free)) is None


def test_random_walks_under_closed_wordings_never_dead_end_and_write_only_wordings():
    fmt = closed()
    alphabet = [chr(c) for c in range(32, 127)] + ["\n"]
    rng = random.Random(0)
    for _ in range(15):
        state, text = fmt.start(), ""
        while not fmt.complete(state):
            options = [(ch, nxt) for ch in alphabet if (nxt := fmt.advance(state, ch)) is not None]
            assert options, f"dead end after {text!r}"
            ch, state = rng.choice(options)
            text += ch
        assert all(step.subtask in WORDINGS for step in parse(text).steps)


def test_the_grammar_offers_the_wordings_as_alternatives():
    grammar = closed().gbnf()
    rule = next(line for line in grammar.splitlines() if line.startswith("str ::="))
    assert rule == 'str ::= "\\"" (' + " | ".join(json.dumps(w) for w in WORDINGS) + ') "\\""'
    assert "[\\x20" not in rule  # no free characters


def test_a_wording_the_conductor_cannot_write_or_fit_is_a_clear_error():
    with pytest.raises(ValueError, match=r"has characters the conductor cannot write \(\"; quotes"):
        WorkflowFormat(3, 3, wordings=('Say "hi".',))
    with pytest.raises(ValueError, match="has 200 characters and the conductor writes 3 to 160"):
        WorkflowFormat(3, 3, wordings=("x" * 200,))
    with pytest.raises(ValueError, match=r"leaves \d+ characters a subtask and the conductor's longest trained wording has 300: raise it"):
        WorkflowFormat.bounded(3, 3, 512, wordings=("x" * 300,))
    with pytest.raises(ValueError, match="has 400 characters and no subtask it writes has more than 320: set subtasks"):
        WorkflowFormat.bounded(3, 3, 4096, wordings=("x" * 400,))
    assert WorkflowFormat.bounded(3, 3, 1024, wordings=WORDINGS).wordings == WORDINGS


def test_taught_wordings_are_each_subtask_once_in_order_of_first_use_and_writable():
    from openconductor.train.warmup import taught_wordings
    from openconductor.workflow import Step, Workflow

    targets = [plan(WORDINGS[1], WORDINGS[0]), plan(WORDINGS[0]), plan(WORDINGS[3], WORDINGS[1])]
    assert taught_wordings(targets) == [WORDINGS[1], WORDINGS[0], WORDINGS[3]]
    # A subtask no conductor can write (non-ASCII, longer than any subtask) is left out: holding to it would refuse every plan.
    odd = Workflow((Step(0, "Summarise the answer \u2014 briefly.", ()), Step(0, "x" * 400, "all"), Step(0, WORDINGS[1], "all")), reasoning="r")
    assert taught_wordings([odd.render()]) == [WORDINGS[1]]


async def test_the_lm_policy_holds_a_trained_conductor_to_its_wordings_unless_the_pool_frees_it(tmp_path, monkeypatch):
    """The checkpoint's model is a test double that records the format it was asked to decode under."""
    from openconductor.policies.base import PlanRequest, make_policy
    from openconductor.pool import Pool, PoolSpec, load_pool
    from openconductor.providers.transformers_local import TransformersProvider
    from openconductor.records import Completion, Usage

    spec = load_pool(ROOT / "examples/pools/simulated_paper_v3.toml")
    formats = []

    def scripted(self, messages, max_tokens, temperature, seed, fmt=None):
        formats.append(fmt)
        return Completion(text=plan(WORDINGS[3]), usage=Usage(input_tokens=1, output_tokens=1), finish_reason="stop", model="scripted")

    monkeypatch.setattr(TransformersProvider, "_generate", scripted)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    manifest = {"format": "openconductor-conductor/1", "kind": "full", "wordings": list(WORDINGS),
                "prompt": {"show": "descriptions", "max_steps": 3, "style": "compact", "examples": False}}
    (ckpt / "openconductor.json").write_text(json.dumps(manifest))
    for subtasks, expected in (("trained", WORDINGS), ("free", ())):
        conductor = spec.conductor.model_copy(update={"checkpoint": str(ckpt), "subtasks": subtasks})
        pool_spec = PoolSpec.model_validate({**spec.model_dump(), "conductor": conductor.model_dump()})
        async with Pool(pool_spec) as pool:
            result = await make_policy("conductor").plan(PlanRequest("What is 2+2?", pool, max_steps=3))
        assert result.workflow is not None and formats[-1].wordings == expected


def test_a_pool_file_with_an_unknown_subtasks_mode_is_refused(tmp_path):
    from openconductor.pool import PoolConfigError, load_pool

    text = (ROOT / "src/openconductor/data/local_pool.toml").read_text()
    path = tmp_path / "pool.toml"
    path.write_text(text.replace("[conductor]\n", '[conductor]\nsubtasks = "closed"\n'))
    with pytest.raises(PoolConfigError, match="subtasks"):
        load_pool(path)


def test_record_wordings_writes_them_from_the_targets_or_the_selection(tmp_path):
    from openconductor.conductor.manifest import read_manifest
    from openconductor.conductor.checkpoint import checkpoint_path

    script = ROOT / "scripts" / "record_wordings.py"
    run = tmp_path / "run"
    (run / "warmup").mkdir(parents=True)
    (run / "warmup" / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "kind": "adapter"}))
    with open(run / "warmup_targets.jsonl", "w") as f:
        for target in (plan(WORDINGS[0], WORDINGS[1]), plan(WORDINGS[3])):
            f.write(json.dumps({"domain": "d", "question": "q", "target": target, "bare": False}) + "\n")
    done = subprocess.run([sys.executable, str(script), str(run / "warmup")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert read_manifest(run / "warmup").wordings == [WORDINGS[0], WORDINGS[1], WORDINGS[3]]
    # A domain search's kept workflows, recorded in the shipped conductor's manifest, were its targets.
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    source = json.loads((checkpoint_path("builtin:local-tools") / "openconductor.json").read_text())
    (shipped / "openconductor.json").write_text(json.dumps(source))
    done = subprocess.run([sys.executable, str(script), str(shipped), "--from-selection"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kept = [parse(k["workflow"]) for d in source["selection"]["domains"] for k in d["kept"]]
    assert set(read_manifest(shipped).wordings) == {s.subtask for w in kept for s in w.steps}
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "nothing")], capture_output=True, text=True)
    assert missing.returncode == 2 and "not a conductor checkpoint (no openconductor.json)" in missing.stderr
    untargeted = subprocess.run([sys.executable, str(script), str(shipped)], capture_output=True, text=True)
    assert untargeted.returncode == 2 and "no such file; name the warm-up's targets with --targets" in untargeted.stderr


@pytest.mark.parametrize("subtasks", ["trained", "free"])
def test_conductor_pool_says_when_the_conductor_is_held_to_its_wordings(tmp_path, subtasks):
    import shutil

    from typer.testing import CliRunner

    from openconductor.cli import app
    from openconductor.conductor.manifest import read_manifest
    from openconductor.conductor.checkpoint import checkpoint_path

    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoint_path("builtin:local-tools"), ckpt)
    manifest = read_manifest(ckpt)
    manifest.wordings = list(WORDINGS)
    manifest.write(ckpt)
    text = (ROOT / "src/openconductor/data/local_pool.toml").read_text()
    pool_file = tmp_path / "pool.toml"
    pool_file.write_text(text.replace('checkpoint = "builtin:local-tools"', f'checkpoint = "ckpt"\nsubtasks = "{subtasks}"'))
    shown = " ".join(CliRunner().invoke(app, ["pool", str(pool_file)]).output.split())
    held = 'it writes only the 4 subtasks it was taught ([conductor] subtasks = "free" lifts that)'
    assert f"trained conductor {ckpt}" in shown and ((held in shown) == (subtasks == "trained"))


def test_the_fits_recipe_holds_grpo_to_the_copys_wordings():
    """`conductor fit --grpo-steps N` samples within what the copy taught, so its final model is held at run time too."""
    from openconductor.pool import load_default_pool
    from openconductor.train.fit.context import FitSettings, recipe

    cfg = recipe(FitSettings(pool="default", out=Path("unused")), load_default_pool())  # the packaged recipe, as the fit loads it
    assert cfg.rollout.subtasks == "trained" and cfg.rollout.constrained


def test_an_eval_folder_sees_the_wordings_held_not_the_setting(tmp_path):
    """The conductor policy's fingerprint (what an eval folder checks before mixing results) carries the wordings the
    conductor is held to: recording them changes it, and a checkpoint that records none plans as before either way."""
    from openconductor.policies.lm import LMConductor
    from openconductor.pool import PoolSpec, load_default_pool

    spec = load_default_pool()

    def fingerprint(checkpoint: str, subtasks: str, constrained: bool | None = None) -> dict:
        conductor = spec.conductor.model_copy(update={"checkpoint": checkpoint, "subtasks": subtasks})
        return LMConductor(constrained=constrained).fingerprint(PoolSpec.model_validate({**spec.model_dump(), "conductor": conductor.model_dump()}))

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "kind": "full"}))
    assert fingerprint(str(ckpt), "trained") == fingerprint(str(ckpt), "free")
    (ckpt / "openconductor.json").write_text(json.dumps({"format": "openconductor-conductor/1", "kind": "full", "wordings": list(WORDINGS)}))
    held, free = fingerprint(str(ckpt), "trained"), fingerprint(str(ckpt), "free")
    assert held != free and held["conductor"]["wordings"] == list(WORDINGS) and "wordings" not in free["conductor"]
    assert fingerprint(str(ckpt), "trained", constrained=False)["conductor"] == free["conductor"]  # no grammar, nothing holds it


@pytest.mark.parametrize("n_workers,steps,max_tokens,longest", [(4, 3, 384, 155), (3, 3, 200, 62), (3, 3, 600, 268), (12, 5, 768, 200)])
def test_the_max_tokens_a_refusal_asks_for_is_the_least_that_fits(n_workers, steps, max_tokens, longest):
    import re

    wordings = ("x" * longest,)
    with pytest.raises(ValueError) as refused:
        WorkflowFormat.bounded(n_workers, steps, max_tokens, fine_grained=True, wordings=wordings)
    need = int(re.search(r"raise it to at least (\d+)", str(refused.value)).group(1))
    assert WorkflowFormat.bounded(n_workers, steps, need, fine_grained=True, wordings=wordings).subtask_chars >= longest
    with pytest.raises(ValueError):
        WorkflowFormat.bounded(n_workers, steps, need - 1, fine_grained=True, wordings=wordings)
