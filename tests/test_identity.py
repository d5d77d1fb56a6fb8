"""Which conductor planned a run (issue 69: `ask`, `trace` and the server said `policy conductor` with empty metadata).

Runs use SIMULATED workers (no model); the checkpoints are the package's shipped adapters and a fake one written
here, read for their identity only (nothing loads them).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

from typer.testing import CliRunner

from _server_kit import config, sim_pool
from openconductor.cli import app
from openconductor.executor import solve
from openconductor.conductor.identity import conductor_identity, identity_line, weights_digest
from openconductor.policies import make_policy
from openconductor.pool import ConductorSpec, Pool, PoolSpec, WorkerSpec
from openconductor.server.client import OpenConductor
from openconductor.traces import TraceStore

SHIPPED = Path(__file__).resolve().parents[1] / "src/openconductor/data/conductors/sim-bucket"


def _sim(name: str) -> WorkerSpec:
    return WorkerSpec(name=name, provider="simulated", max_retries=0)


def _spec(**conductor) -> PoolSpec:
    return PoolSpec(name="p", workers=[_sim("a"), _sim("b")], conductor=ConductorSpec(**conductor))


def test_a_checkpoint_is_named_with_the_digest_of_its_weights_and_its_base_model():
    backend = WorkerSpec(name="conductor:sim-bucket", provider="local_gguf", model="/x/conductor.gguf")
    spec = _spec(checkpoint=str(SHIPPED), backend=backend)
    who = conductor_identity(make_policy("conductor"), SimpleNamespace(spec=spec))
    expected = hashlib.sha256((SHIPPED / "adapter_config.json").read_bytes() + (SHIPPED / "adapter_model.safetensors").read_bytes()).hexdigest()
    manifest = json.loads((SHIPPED / "openconductor.json").read_text())
    assert (who.kind, who.checkpoint, who.sha256, who.engine) == ("checkpoint", "builtin:sim-bucket", expected, "local_gguf")
    assert who.base_model == (manifest.get("model") or manifest.get("base_model"))
    assert who.line().startswith(f"trained conductor builtin:sim-bucket (sha256 {expected[:12]}, base ")


def test_a_checkpoint_retrained_into_the_same_dir_has_another_digest(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights one")
    first = weights_digest(tmp_path)
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights two, longer")
    assert first and weights_digest(tmp_path) not in (None, first)
    who = conductor_identity(make_policy("conductor"), SimpleNamespace(spec=_spec(checkpoint=str(tmp_path))))
    assert who.checkpoint == str(tmp_path) and who.base_model is None


def test_what_is_kept_between_runs_follows_the_files(tmp_path):
    """Identity is read from files once per change (a few stats per run): a file added to a directory whose listing
    is kept, or a manifest rewritten, is seen at the next run."""
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "openconductor.json").write_text(json.dumps({"base_model": "one"}))
    old = time.time_ns() - 10**10
    os.utime(tmp_path, ns=(old, old))  # settled long ago: its listing is kept
    pool = SimpleNamespace(spec=_spec(checkpoint=str(tmp_path)))
    first = conductor_identity(make_policy("conductor"), pool)
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights")
    (tmp_path / "openconductor.json").write_text(json.dumps({"base_model": "the second one"}))
    second = conductor_identity(make_policy("conductor"), pool)
    assert first.base_model == "one" and second.base_model == "the second one"
    assert second.sha256 == hashlib.sha256(b"{}" + b"weights").hexdigest() != first.sha256


async def test_every_run_records_its_planner_prompted_worker_or_policy():
    async with Pool(_spec(worker="b")) as pool:
        prompted = await solve("q", make_policy("conductor"), pool)
        baseline = await solve("q", make_policy("moa"), pool, metadata={"eval": {"task": "t"}})
    assert prompted.metadata["conductor"] == {"kind": "prompted", "policy": "conductor", "worker": "b", "provider": "simulated", "model": ""}
    assert baseline.metadata == {"eval": {"task": "t"}, "conductor": {"kind": "policy", "policy": "moa"}}
    assert identity_line(baseline.metadata) == "policy moa (no conductor model plans)"
    assert identity_line({}) is None  # a run stored before runs recorded it


def test_ask_and_trace_show_who_planned(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCONDUCTOR_TRACES", str(tmp_path / "traces.sqlite3"))
    monkeypatch.setenv("COLUMNS", "200")
    pool = tmp_path / "p.toml"
    pool.write_text('name = "p"\n[[workers]]\nname = "a"\nprovider = "simulated"\n[conductor]\nworker = "a"\n')
    shown = CliRunner().invoke(app, ["ask", "q", "--pool", str(pool)])
    assert "planned by  prompted conductor: worker 'a' (simulated / -)" in shown.output
    done = CliRunner().invoke(app, ["ask", "q", "--pool", str(pool), "--json"])
    run = json.loads(done.output)
    assert run["metadata"]["conductor"]["worker"] == "a"
    trace = CliRunner().invoke(app, ["trace", run["id"][:8]])
    assert "planned by  prompted conductor: worker 'a'" in trace.output


def test_the_servers_response_metadata_says_who_planned(tmp_path):
    cfg = config(tmp_path, {"conductor": {"version": "v1", "pool": sim_pool(tmp_path), "policy": "conductor"}}, keys=[],
                 server={"traces": str(tmp_path / "traces.sqlite3")})
    with OpenConductor(cfg) as client:
        reply = client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
    planned = reply.model_extra["conductor"]["planned_by"]
    assert planned == {"kind": "prompted", "policy": "conductor", "worker": "planner", "provider": "simulated", "model": ""}
    saved = TraceStore(cfg.server.traces).get(reply.model_extra["conductor"]["trace_id"])
    assert saved.metadata["conductor"] == planned and saved.metadata["api_key"] == "in-process"


def test_a_checkpoints_identity_is_looked_up_once_and_again_after_a_retrain(tmp_path):
    """Every run records it; a retrain rewrites the manifest (and the weights), which a cached identity must notice."""
    def who():
        return conductor_identity(make_policy("conductor"), SimpleNamespace(spec=_spec(checkpoint=str(tmp_path))))

    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights one")
    (tmp_path / "openconductor.json").write_text(json.dumps({"model": "base-one"}))
    first = who()
    assert who() == first and first.base_model == "base-one"
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights two, longer")
    (tmp_path / "openconductor.json").write_text(json.dumps({"model": "base-two"}))
    second = who()
    assert (second.base_model, second.sha256) == ("base-two", weights_digest(tmp_path)) and second.sha256 != first.sha256
    (tmp_path / "model.safetensors").write_bytes(b"full weights")  # a new weight file, manifest untouched: the folder changed
    assert who().sha256 not in (second.sha256, None)
