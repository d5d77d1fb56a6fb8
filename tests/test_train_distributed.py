"""GRPO data-parallel under ``accelerate launch``: 2 CPU processes on gloo (examples/accelerate/cpu_2proc.yaml).

``conductor train`` and ``conductor fit --grpo-steps`` are launched as real processes on the tiny random Llama of
train_helpers against SIMULATED pools (no network); each run's checkpoint is compared with one process's of the same
config: the same files, the same manifest fields, loadable by the runtime loader. That both processes trained is in
the manifest (``processes``, and the reward batches each one scored on the pool).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")
pytest.importorskip("accelerate")
sys.path.insert(0, str(Path(__file__).parent))

from test_train_grpo import tiny_config  # noqa: E402

import openconductor  # noqa: E402
from openconductor.train.config import TrainConfigError, load_train_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(openconductor.__file__).resolve().parents[1]


def launch(args: list[str], cwd: Path, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    """``accelerate launch --config_file examples/accelerate/cpu_2proc.yaml -m openconductor ARGS`` on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (SRC, *path))), "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    cmd = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", str(ROOT / "examples/accelerate/cpu_2proc.yaml"),
           "--main_process_port", str(port), "-m", "openconductor", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return done


def manifest(checkpoint: Path) -> dict:
    return json.loads((checkpoint / "openconductor.json").read_text())


def same_kind(one: Path, two: Path, *, differ: set[str]) -> tuple[dict, dict]:
    """The two checkpoints hold the same files and manifest fields (values alike but for ``differ``), and load."""
    from openconductor.conductor.checkpoint import load_checkpoint

    assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in two.iterdir())
    a, b = manifest(one), manifest(two)
    assert set(a) == set(b)
    assert {k: v for k, v in a.items() if k not in differ} == {k: v for k, v in b.items() if k not in differ}
    model, tokenizer = load_checkpoint(two)
    assert model.config.num_hidden_layers == 2 and tokenizer.eos_token == "<|im_end|>"
    return a, b


@pytest.mark.heavy
def test_conductor_train_runs_on_two_processes_and_writes_one_process_kind_of_checkpoint(tmp_path):
    from openconductor.train.trainer import train

    path = tiny_config(tmp_path, max_steps=2)
    done = launch(["train", str(path)], tmp_path)
    assert done.stdout.count("exported") == 1  # said by the main process only
    run = tmp_path / "run"
    one = train(load_train_config(path, {"run.output_dir": str(tmp_path / "one")}))
    a, b = same_kind(one, run / "final", differ={"train_seconds", "processes", "reward_calls_per_process", "replay"})
    assert (a["processes"], b["processes"]) == (1, 2)
    # Each process sampled its share, executed it on the pool and graded it: one reward batch per step each.
    assert a["reward_calls_per_process"] == [2] and b["reward_calls_per_process"] == [2, 2]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # one writer: no row twice
    assert (run / "checkpoint-2" / "model.safetensors").is_file() and (run / "warmup" / "openconductor.json").is_file()


WORLD = '''
import re
from openconductor import worker_message
from openconductor.providers.simulated import register_responder

CAPITALS = {capitals}


def _task(messages):
    context = worker_message.parse_rendered(messages)
    return context.question if context else str(messages[-1]["content"])


@register_responder("dist-calc")
def calc(spec, messages, rng):
    m = re.search(r"What is (\\d+) plus (\\d+)", _task(messages))
    return f"Final answer: {{int(m.group(1)) + int(m.group(2))}}" if m else "Final answer: I do not know"


@register_responder("dist-know")
def know(spec, messages, rng):
    m = re.search(r"capital of (\\w+)", _task(messages))
    return f"Final answer: {{CAPITALS[m.group(1)]}}" if m else "Final answer: 0"
'''


@pytest.mark.heavy
def test_conductor_fit_grpo_runs_on_two_processes_and_one_process_goes_on_from_its_folder(tmp_path):
    """The SIMULATED workers live in a module the pool names (``world_module``), so the launched processes have them."""
    from test_fit import CAPITALS, _files

    from openconductor.providers.simulated import RESPONDERS
    from openconductor.train.fit.context import FitSettings
    from openconductor.train.fit.run import run_fit

    (tmp_path / "distworld.py").write_text(WORLD.format(capitals=repr(CAPITALS)))
    files = _files(tmp_path)
    pool = files["pool"].read_text()
    for name in ("calc", "know"):
        pool = pool.replace(f'world = "fit-{name}" }}', f'world = "dist-{name}", world_module = "distworld" }}')
    files["pool"].write_text(pool)
    flags = ["--questions", str(files["questions"]), "--recipe", str(files["recipe"]), "--out", str(tmp_path / "out"), "--per-task", "6",
             "--eval-n", "2", "--fidelity-bar", "0"]
    done = launch(["fit", str(files["pool"]), *flags, "--grpo-steps", "2"], tmp_path, (tmp_path,))
    result = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"event": "result"')]
    assert len(result) == 1 and result[0]["status"] == "done"  # one process reports
    out = tmp_path / "out"
    two = {p.name: p.read_bytes() for p in (out / "conductor").iterdir()}
    record = manifest(out / "conductor")
    assert record["processes"] == 2 and record["reward_calls_per_process"] == [2, 2] and record["fit"]["from"] == "final"
    spent = json.loads((out / "fit.json").read_text())["stages"]["grpo"]["spend"]
    assert spent["calls"] > 0  # both processes' real worker calls, counted by the main one
    # One process, same folder, one more GRPO step: every stage before GRPO is kept; its checkpoint is of the same kind.
    sys.path.insert(0, str(tmp_path))
    try:
        again = run_fit(FitSettings(pool=str(files["pool"]), out=out, questions=files["questions"], per_task=6, eval_n=2,
                                    recipe=files["recipe"], fidelity_bar=0.0, grpo_steps=3))
    finally:
        sys.path.remove(str(tmp_path))
        RESPONDERS.pop("dist-calc", None)
        RESPONDERS.pop("dist-know", None)
    assert again.checkpoint == out / "conductor" and sorted(two) == sorted(p.name for p in again.checkpoint.iterdir())
    one = manifest(again.checkpoint)
    assert set(one) == set(record) and one["processes"] == 1 and one["reward_calls_per_process"] == [3]
    assert one["fit"]["targets"] == record["fit"]["targets"] and one["pool"] == record["pool"]


def test_a_generation_batch_that_is_not_whole_groups_is_refused_with_the_process_count(tmp_path, monkeypatch):
    """2 completions a process and groups of 4: one process is refused when the config loads, two make whole groups."""
    from openconductor.train.config import check_batch

    path, bad = tiny_config(tmp_path), {"grpo.per_device_train_batch_size": 2}
    with pytest.raises(TrainConfigError, match=r"generation batch of 2 completions .* 1 process x 1 steps.* multiple of 4"):
        load_train_config(path, bad)
    monkeypatch.setenv("WORLD_SIZE", "2")  # what accelerate launch's launcher sets in each process
    cfg = load_train_config(path, bad)
    with pytest.raises(TrainConfigError, match="x 3 processes"):
        check_batch(cfg.settings, 3)
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(TrainConfigError, match="x 3 processes"):
        load_train_config(path, bad)


def test_a_fit_with_a_cap_is_refused_under_several_processes(tmp_path, monkeypatch):
    from openconductor.train.fit import distributed
    from openconductor.train.fit.context import FitSettings

    monkeypatch.setattr(distributed, "fit_state", lambda: SimpleNamespace(num_processes=2))
    with pytest.raises(TrainConfigError, match="checked in one process, and GRPO runs in 2"):
        distributed.Relay(FitSettings(pool="default", out=tmp_path, max_calls=10))
    distributed.Relay(FitSettings(pool="default", out=tmp_path))  # no cap: nothing to refuse
