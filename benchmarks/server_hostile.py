"""Hostile clients against `conductor serve` (a separate process on 127.0.0.1, SIMULATED workers): the four
measures of issue 33's server goals, printed as measured.

1. event loop: hostile requests under the 1 MB body limit (a 0.88 MB schema with 10,000 properties, a
   schema near the size cap, a 980-deep body, 6,000 and 20,000 messages, one 900 KB message, 128 tools,
   a $ref cycle), sent --rounds times by 4 clients at once, while /health is probed every 10 ms. The
   server runs with ``slow_callback_ms`` (asyncio debug mode logs every event-loop step longer than
   that); the longest step logged is the longest the loop was held. Debug mode slows the server a little.
2. malformed: requests a client can get wrong (bodies and raw HTTP), and how many got a 4xx JSON error.
3. quota: 3 requests of one key at once against tokens_per_day = 300 (one run alone spends 104).
4. kill -9: clients keep asking (half streaming) until --answered runs were answered, then SIGKILL; the
   store is swept as a restarted server would; how many answered runs are stored as anything but ok.
5. not found: median latency of 404s for a prefix of another key's run and for a prefix of nothing.

    PYTHONPATH=src python benchmarks/server_hostile.py

Run it alone (under the heavy-job lock on a shared machine): the loop and /health numbers are wall-clock.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml

from openconductor.server import hash_key
from openconductor.traces import TraceStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from stack import Stack  # noqa: E402  (deploy/stack.py: a development tool, not in the package)

KEY, OTHER = "sk-bench-a", "sk-bench-b"
H = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
SRC = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
SLOW_STEP = re.compile(r"Executing (.*?) took (\d+\.\d+) seconds")
QUESTION = "Explain the answer to 2 + 2 at length. " * 3


def write_config(directory: Path, **server) -> Path:
    (directory / "sim.yaml").write_text(yaml.safe_dump({"name": "sim", "workers": [
        {"name": "alpha", "provider": "simulated", "options": {"latency_s": 0.03}},
        {"name": "slow", "provider": "simulated", "options": {"latency_s": 0.5}}]}))
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in {"traces": str(directory / "traces.sqlite3"), **server}.items())
    keys = "".join(f'\n[[keys]]\nname = "{name}"\nsha256 = "{hash_key(key)}"\nmax_concurrent = 64\nrequests_per_minute = 600000\n{extra}'
                   for name, key, extra in (("a", KEY, ""), ("b", OTHER, ""), ("q", "sk-bench-q", "tokens_per_day = 300\n")))
    models = "".join(f'\n[models.{name}]\nversion = "v1"\npool = "sim.yaml"\npolicy = "single"\npolicy_options = {{ worker = "{worker}" }}\n'
                     for name, worker in (("one", "alpha"), ("slow", "slow")))
    path = directory / "server.toml"
    path.write_text(f"[server]\n{lines}\n{keys}{models}")
    return path


def hostile_bodies() -> list[tuple[str, bytes]]:
    ask = {"model": "one", "messages": [{"role": "user", "content": "q"}]}

    def schema(n: int, pad: int) -> dict:
        return {"type": "object", "properties": {f"field_{i:05d}": {"type": "string", "description": "d" * pad} for i in range(n)}}

    def fmt(s: dict) -> dict:
        return {**ask, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": s}}}

    bodies = [
        ("0.88 MB schema, 10,000 properties", fmt(schema(10_000, 34))),
        ("schema near the cap, 1,200 properties", fmt(schema(1_200, 20))),
        ("980-deep body", b'{"model": "one", "metadata": ' + b"[" * 980 + b"]" * 980 + b"}"),
        ("20,000 messages", {"model": "one", "messages": [{"role": "user", "content": "x y"}] * 20_000}),
        ("6,000 messages", {"model": "one", "messages": [{"role": "user", "content": "x y"}] * 6_000}),
        ("one 900 KB message", {"model": "one", "messages": [{"role": "user", "content": "word " * 180_000}]}),
        ("128 tools", {**ask, "tools": [{"type": "function", "function": {"name": f"t{i}", "parameters": schema(30, 40)}} for i in range(128)]}),
        ("$ref cycle", {**ask, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#"}}}]}),
    ]
    return [(name, b if isinstance(b, bytes) else json.dumps(b).encode()) for name, b in bodies]


PROBE = """
import json, os, sys, time, httpx
url, stop, seen = sys.argv[1], sys.argv[2], []
with httpx.Client() as c:
    while not os.path.exists(stop):
        t = time.perf_counter()
        c.get(url + "/health")
        seen.append(time.perf_counter() - t)
        time.sleep(0.01)
print(json.dumps(seen))
"""


def event_loop(stack: Stack, rounds: int) -> None:
    url = stack.server(write_config(stack.directory / "loop", slow_callback_ms=10), name="loop", env=SRC)
    log = stack.directory / "loop.log"
    start = log.stat().st_size
    bodies = hostile_bodies()
    assert all(len(b) < 1_000_000 for _, b in bodies)
    stop = stack.directory / "loop" / "stop"
    # The prober is its own process: in this one, the clients' threads would delay it (the GIL), not the server.
    prober = subprocess.Popen([sys.executable, "-c", PROBE, url, str(stop)], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda item: httpx.post(f"{url}/v1/chat/completions", content=item[1], headers=H, timeout=120),
                                bodies * rounds))
    stop.touch()
    health = json.loads(prober.communicate()[0])
    steps = sorted(((float(m.group(2)), re.sub(r" (created at|defined at|wait_for=).*", "", m.group(1))[:110]) for m in SLOW_STEP.finditer(log.read_text(errors="replace")[start:])), reverse=True)
    print(f"\n1. event loop: {len(replies)} hostile requests ({rounds} rounds of {len(bodies)}, 4 at once), all under 1 MB")
    for (name, _), r in zip(bodies, replies):
        print(f"   {name:40s} {r.status_code} {r.json().get('error', {}).get('code') or 'answered'}")
    print(f"   longest event-loop step: {steps[0][0] * 1000 if steps else 0:.1f} ms; steps over 50 ms: "
          f"{sum(s > 0.05 for s, _ in steps)}; over 10 ms: {len(steps)}")
    for took, what in steps[:3]:
        print(f"     {took * 1000:6.1f} ms  {what}")
    print(f"   /health while they ran: {len(health)} probes, median {statistics.median(health) * 1000:.1f} ms, "
          f"p99 {sorted(health)[int(len(health) * 0.99)] * 1000:.1f} ms, max {max(health) * 1000:.1f} ms")


def _raw(url: str, data: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def malformed(url: str) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n"

    def post(body: bytes) -> bytes:
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    ask = {"model": "one", "messages": [{"role": "user", "content": "x"}]}
    rf = lambda schema: json.dumps({**ask, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}).encode()  # noqa: E731
    tool = lambda schema: json.dumps({**ask, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}).encode()  # noqa: E731
    cases = {
        "invalid JSON": post(b"{not json"),
        "not an object": post(b"[1, 2]"),
        "empty body": post(b""),
        "NaN": post(b'{"seed": NaN}'),
        "5,000-digit integer": post(b'{"seed": ' + b"7" * 5000 + b"}"),
        "bad UTF-8": post(b'{"a": "\xff\xfe"}'),
        "nested 980 deep": post(b'{"a": ' + b"[" * 980 + b"]" * 980 + b"}"),
        "25,000 messages (values)": post(json.dumps({"model": "one", "messages": [{"role": "user", "content": "x"}] * 25_000}).encode()),
        "unknown field": post(json.dumps({**ask, "nope": 1}).encode()),
        "missing messages": post(b'{"model": "one"}'),
        "schema of type banana": post(rf({"type": "banana"})),
        "tool schema properties {a: 5}": post(tool({"properties": {"a": 5}})),
        "$ref cycle": post(rf({"$ref": "#"})),
        "Content-Length: abc": head + b"Content-Length: abc\r\n\r\n{}",
        "Content-Length: -5": head + b"Content-Length: -5\r\n\r\n{}",
        "two Content-Lengths": head + b"Content-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
        "Content-Length and chunked": head + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        "body over the limit": head + b"Content-Length: 2000000\r\n\r\n{}",
        "not HTTP": b"GARBAGE\r\n\r\n",
    }
    good = 0
    print(f"\n2. malformed requests: {len(cases)}")
    for name, data in cases.items():
        got = _raw(url, data)
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1") else 0
        head_part, _, body = got.partition(b"\r\n\r\n")
        length = re.search(rb"content-length: (\d+)", head_part, re.I)
        try:
            code = json.loads(body[: int(length.group(1))] if length else body)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        good += 400 <= status < 500 and code is not None
        print(f"   {name:32s} {status} {code}")
    print(f"   {good} of {len(cases)} answered with a 4xx JSON error")


def quota(url: str, store: Path) -> None:
    body = {"model": "one", "messages": [{"role": "user", "content": QUESTION}]}
    barrier = threading.Barrier(3)

    def ask(_):
        barrier.wait()
        return httpx.post(f"{url}/v1/chat/completions", json={**body, "model": "slow"},
                          headers={"Authorization": "Bearer sk-bench-q"}, timeout=60)

    with ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(ask, range(3)))
    import sqlite3

    with sqlite3.connect(store) as db:
        charged, held = db.execute("SELECT tokens, held_tokens FROM quota_days WHERE api_key = 'q'").fetchone()
    print(f"\n3. quota: 3 requests at once, tokens_per_day = 300: statuses {[r.status_code for r in replies]}, "
          f"tokens used by the runs {sum(r.json().get('usage', {}).get('total_tokens', 0) for r in replies)}, charged {charged}, still held {held}")


def not_found(url: str, n: int) -> None:
    theirs = httpx.post(f"{url}/v1/chat/completions", json={"model": "one", "messages": [{"role": "user", "content": "x"}]},
                        headers=H).json()["conductor"]["trace_id"]
    nothing = next(p for p in ("0123", "4567", "89ab", "cdef") if not theirs.startswith(p))
    times: dict[str, list[float]] = {"another key's run prefix": [], "a prefix of nothing": []}
    with httpx.Client(headers={"Authorization": f"Bearer {OTHER}"}) as c:
        for i in range(2 * n):
            name, run_id = list(times.items())[i % 2][0], (theirs[:6], nothing[:6])[i % 2]
            t = time.perf_counter()
            r = c.get(f"{url}/v1/traces/{run_id}")
            times[name].append(time.perf_counter() - t)
            assert r.status_code == 404
    print(f"\n5. not found ({n} each, interleaved): " + "; ".join(f"{k} median {statistics.median(v) * 1000:.2f} ms" for k, v in times.items()))


def kill_9(stack: Stack, want: int) -> None:
    url = stack.server(write_config(stack.directory / "victim"), name="victim", env=SRC)
    answered: list[str] = []
    stop = threading.Event()

    def client(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            body = {"model": "one", "messages": [{"role": "user", "content": f"q {n} {i}"}], "stream": n % 2 == 1}
            try:
                if not body["stream"]:
                    answered.append(httpx.post(f"{url}/v1/chat/completions", json=body, headers=H, timeout=30).json()["conductor"]["trace_id"])
                    continue
                with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=H, timeout=30) as r:
                    run_id = None
                    for line in r.iter_lines():
                        run_id = run_id or (json.loads(line[6:])["id"].removeprefix("chatcmpl-") if line.startswith("data: {") else None)
                        if line == "data: [DONE]":
                            answered.append(run_id)
            except Exception:
                return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    while len(answered) < want:
        time.sleep(0.01)
    stack.kill("victim", signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()
    store = TraceStore(stack.directory / "victim" / "traces.sqlite3")
    swept = store.sweep_interrupted()
    stored = {r["id"]: r["status"] for r in store.list(limit=1_000_000)}
    failed = sum(stored.get(run_id) != "ok" for run_id in answered)
    print(f"\n4. kill -9 under 8 clients: {len(answered)} runs answered, {failed} of them stored as failed or missing; "
          f"{len(swept)} unanswered runs marked interrupted by the sweep")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--answered", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=300)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="oc-hostile-"))
    for sub in ("loop", "main", "victim"):
        (directory / sub).mkdir()
    print(f"python {sys.version.split()[0]}; load average before: {open('/proc/loadavg').read().split()[:3]}")
    with Stack(directory) as stack:
        event_loop(stack, args.rounds)
        url = stack.server(write_config(directory / "main"), name="main", env=SRC)
        malformed(url)
        quota(url, directory / "main" / "traces.sqlite3")
        kill_9(stack, args.answered)
        not_found(url, args.lookups)


if __name__ == "__main__":
    main()
