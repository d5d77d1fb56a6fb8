"""The server as a separate process (``conductor serve``): killed with SIGKILL under load, nothing it had
answered is stored as failed; a dead owner not yet reaped is swept; and no hostile request under the
body limit holds its event loop (asyncio's debug mode logs every step that runs longer than asked)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml

from _server_kit import KEY, hostile_bodies, loop_lags, slow_steps
from openconductor.records import Run
from openconductor.server import hash_key
from openconductor.traces import Owner, TraceStore, row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from stack import Stack, _children  # noqa: E402  (deploy/stack.py: a development tool, not in the package)

pytestmark = pytest.mark.timeout(300)
H = {"Authorization": f"Bearer {KEY}"}
SRC = {"PYTHONPATH": str(Path(__file__).parents[1] / "src")}  # the server process runs this checkout


def server_config(directory: Path, **server) -> Path:
    (directory / "sim.yaml").write_text(yaml.safe_dump({"name": "sim", "workers": [
        {"name": "alpha", "provider": "simulated", "options": {"latency_s": 0.03}}]}))
    lines = [f"{k} = {json.dumps(v)}" for k, v in {"traces": str(directory / "traces.sqlite3"), **server}.items()]
    path = directory / "server.toml"
    path.write_text("[server]\n" + "\n".join(lines) + f"""
[[keys]]
name = "alpha"
sha256 = "{hash_key(KEY)}"
max_concurrent = 64
requests_per_minute = 600000
[models.one]
version = "v1"
pool = "sim.yaml"
policy = "single"
policy_options = {{ worker = "alpha" }}
""")
    return path


@pytest.fixture
def stack():
    directory = Path(tempfile.mkdtemp(prefix="oc-crash-"))
    with Stack(directory) as s:
        yield s


def _ask(url: str, i: int, stream: bool) -> str:
    """One request; the run id once it is answered (the whole answer, or the stream's [DONE])."""
    body = {"model": "one", "messages": [{"role": "user", "content": f"question {i}"}], "stream": stream}
    if not stream:
        r = httpx.post(f"{url}/v1/chat/completions", json=body, headers=H, timeout=30)
        r.raise_for_status()
        return r.json()["conductor"]["trace_id"]
    run_id = None
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=H, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and run_id is None:
                run_id = json.loads(line[6:])["id"].removeprefix("chatcmpl-")
            if line == "data: [DONE]":
                return run_id
    raise ConnectionError("the stream ended without [DONE]")


def test_answered_runs_survive_a_kill_9(stack):
    url = stack.server(server_config(stack.directory), name="victim", env=SRC)
    answered: list[str] = []
    stop = threading.Event()

    def client(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                answered.append(_ask(url, n * 100_000 + i, stream=n % 2 == 1))
            except Exception:  # the server died under it: not answered
                return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(answered) < 150 and time.monotonic() < deadline:
        time.sleep(0.02)
    stack.kill("victim", signal.SIGKILL)  # mid-traffic: some runs answered a moment ago, some in flight
    stop.set()
    for t in threads:
        t.join(timeout=30)
    store = TraceStore(stack.directory / "traces.sqlite3")
    swept = store.sweep_interrupted()  # what a restarted server does first
    stored = {r["id"]: r["status"] for r in store.list(limit=100_000)}
    failed = [run_id for run_id in answered if stored.get(run_id) != "ok"]
    print(f"SIGKILL: {len(answered)} runs answered, {len(failed)} of them stored as failed or missing; "
          f"{len(swept)} unanswered runs in flight marked interrupted")
    assert len(answered) >= 100
    assert failed == [], {run_id: stored.get(run_id) for run_id in failed}
    assert all(stored[run_id] == "error" for run_id in swept)


def test_a_dead_owner_not_yet_reaped_is_swept(tmp_path):
    path = tmp_path / "traces.sqlite3"
    store = TraceStore(path)
    code = ("import sys, time; from openconductor.traces import TraceStore, row; from openconductor.records import Run; "
            "s = TraceStore(sys.argv[1]); s.write([row(Run(question='q', policy='p'), s.owner.id)]); print('ready', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True, env={**os.environ, **SRC})
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)  # dead, not reaped: its pid and start time are still in /proc
        swept = store.sweep_interrupted()
    finally:
        proc.wait()
    assert len(swept) == 1 and store.get(swept[0]).error.startswith("interrupted:")
    # a live process's pid with another start time (the pid was reused): its runs are gone too
    reused = Owner(Owner.current().host, Owner.current().boot, Owner.current().pid, "1")
    assert reused.gone(Owner.current()) is True
    store.write([row(Run(question="mine", policy="p"), Owner.current().id)])
    assert store.sweep_interrupted() == []  # this process is alive


def test_no_hostile_request_holds_the_event_loop(stack):
    url = stack.server(server_config(stack.directory, slow_callback_ms=10), name="watched", env=SRC)
    log = stack.directory / "watched.log"
    start = log.stat().st_size  # steps logged from here on (start-up is not a request)
    bodies = hostile_bodies()
    assert all(len(b) < 1_000_000 for _, b in bodies)

    def send(item):
        return httpx.post(f"{url}/v1/chat/completions", content=item[1], headers={**H, "Content-Type": "application/json"}, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(send, bodies * 2))
    httpx.get(f"{url}/health")
    statuses = [(name, r.status_code, r.text[:120]) for (name, _), r in zip(bodies * 2, replies)]
    assert all(r.status_code in (200, 400) for r in replies), [s for s in statuses if s[1] not in (200, 400)]
    assert all(r.headers["content-type"].startswith("application/json") for r in replies)
    text = log.read_text(errors="replace")[start:]
    steps, lags = slow_steps(text), loop_lags(text)
    worst = steps[0] if steps else (0.0, "none over 10 ms")
    print(f"event loop: {len(steps)} steps over 10 ms; the longest {worst[0] * 1000:.1f} ms ({worst[1]}); "
          f"longest lag {max(lags, default=0.0) * 1000:.1f} ms")
    # The goal is 50 ms, measured by benchmarks/server_hostile.py beside an idle loop's lag (the machine's floor);
    # here, on a shared 2-core machine where the clients, the check process and other jobs take turns on the
    # cores, a margin.
    assert worst[0] < 0.15, steps[:5]


def _state(pid: int) -> str:
    """The process's state letter ("Z": dead, not reaped), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        children = _children(todo.pop())
        found.update(children)
        todo += children
    return found


def test_a_killed_server_leaves_no_check_processes(stack):
    """SIGKILL to a two-worker server and its direct children (uvicorn's workers): the request-check processes
    those workers started are gone too, not orphans waiting for work forever."""
    url = stack.server(server_config(stack.directory), name="victim", workers=2, env=SRC)
    for i in range(4):  # the check processes are started with each worker; a request or two makes sure
        assert httpx.post(f"{url}/v1/chat/completions", json={"model": "one", "messages": [{"role": "user", "content": f"q{i}"}]},
                          headers=H, timeout=60).status_code == 200
    proc = next(p for n, p in stack.processes if n == "victim")
    checkers = {pid for pid in _descendants(proc.pid) if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()}
    assert checkers, "no check process found under the server"
    stack.kill("victim", signal.SIGKILL)

    def alive() -> list[int]:
        return [pid for pid in checkers if _state(pid) not in ("Z", "gone")]

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive():
        time.sleep(0.1)
    left = alive()
    for pid in left:  # do not leave them behind for the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} of {len(checkers)} check processes outlived the server"
