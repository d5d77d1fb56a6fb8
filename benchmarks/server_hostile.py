"""Hostile clients against `conductor serve` (a separate process on 127.0.0.1, SIMULATED workers): the four
measures of issue 33's server goals, printed as measured.

1. event loop: hostile requests under the 1 MB body limit (a 0.88 MB schema with 10,000 properties, a
   schema near the size cap, a 980-deep body, 6,000 and 20,000 messages, one 900 KB message, 128 tools,
   a $ref cycle), sent --rounds times by 4 clients at once, while /health is probed every 10 ms. The
   server runs with ``slow_callback_ms`` (asyncio debug mode logs every event-loop step longer than that,
   and the loop's lag, sampled every 5 ms); the longest lag is the longest the loop was held, printed beside
   an idle loop's longest lag in another process meanwhile (the machine's floor: on a loaded machine a
   process waits for a core). Debug mode slows the server a little.
2. malformed: requests a client can get wrong (bodies and raw HTTP), and how many got a 4xx JSON error.
3. quota: 3 requests of one key at once against tokens_per_day = 300 (one run alone spends 104).
4. kill -9: clients keep asking (half streaming) until --answered runs were answered, then SIGKILL; the
   store is swept as a restarted server would; how many answered runs are stored as anything but ok.
5. not found: median latency of 404s for a prefix of another key's run and for a prefix of nothing.
6. request heads (issue 70): a 50 MB header line, a 1 MB header line, 10,000 headers and 37 KB of headers,
   each sent --head-rounds times (4 connections at once) while /health is probed; the statuses, the longest
   event-loop lag and step (as in 1) and the server's memory growth per hostile connection.
7. Unicode: the raw bytes of a lone surrogate (ED A0 80) and its escape, at each entry (chat, responses,
   completions, a tool result) of a multi-step preset; how many runs failed or stored a surrogate.
8. limits and quotas: a nearly spent quota, a quota the run spends before it answers, a request budget below
   one step, a run cut after it answered; how many answers were an empty 200.
9. validation: what OpenAI refuses (tools, tool_choice, sampling numbers, two keys, trace paging).

    PYTHONPATH=src python benchmarks/server_hostile.py

Run it alone (under the heavy-job lock on a shared machine): the loop and /health numbers are wall-clock.
"""

from __future__ import annotations

import argparse
import json
import os
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "deploy"), str(ROOT / "tests")]
from _server_kit import HOSTILE_HEADS, big_line, hostile_bodies, loop_lags, send_head, slow_steps  # noqa: E402  (tests/: the hostile clients the tests send)
from stack import Stack  # noqa: E402  (deploy/stack.py: a development tool, not in the package)

KEY, OTHER = "sk-bench-a", "sk-bench-b"
H = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
SRC = {"PYTHONPATH": str(ROOT / "src")}
QUESTION = "Explain the answer to 2 + 2 at length. " * 3


def write_config(directory: Path, **server) -> Path:
    (directory / "sim.yaml").write_text(yaml.safe_dump({"name": "sim", "workers": [
        {"name": "alpha", "provider": "simulated", "options": {"latency_s": 0.03}},
        {"name": "slow", "provider": "simulated", "options": {"latency_s": 0.5}}]}))
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in {"traces": str(directory / "traces.sqlite3"), **server}.items())
    keys = "".join(f'\n[[keys]]\nname = "{name}"\nsha256 = "{hash_key(key)}"\nmax_concurrent = 64\nrequests_per_minute = 600000\n{extra}'
                   for name, key, extra in (("a", KEY, ""), ("b", OTHER, ""), ("q", "sk-bench-q", "tokens_per_day = 300\n"),
                                            ("n", "sk-bench-n", "tokens_per_day = 254\n")))
    models = "".join(f'\n[models.{name}]\nversion = "v1"\npool = "sim.yaml"\npolicy = "single"\npolicy_options = {{ worker = "{worker}" }}\n'
                     for name, worker in (("one", "alpha"), ("slow", "slow")))
    models += '\n[models.moa]\nversion = "v1"\npool = "sim.yaml"\npolicy = "moa"\n'  # several steps, like the preset
    path = directory / "server.toml"
    path.write_text(f"[server]\n{lines}\n{keys}{models}")
    return path


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


FLOOR = """
import asyncio, sys
from openconductor.server.metrics import watch_loop_lag
lags = [0.0]
async def main():
    asyncio.get_running_loop().set_debug(True)  # as the server runs
    watcher = asyncio.create_task(watch_loop_lag(0.0, lags.append))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    watcher.cancel()
asyncio.run(main())
print(max(lags))
"""


def floor() -> subprocess.Popen:
    """An idle event loop in its own process, sampled as the server's is: its longest lag is the machine's floor
    (scheduling on a loaded machine), the part of the server's lag that no server code caused."""
    idle = subprocess.Popen([sys.executable, "-c", FLOOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **SRC})
    assert idle.stdout is not None and idle.stdout.readline().strip() == "ready"
    return idle


def loop_report(log: Path, start: int, idle: subprocess.Popen) -> None:
    """The longest lag and slow steps the server logged after byte ``start``, beside the idle loop's lag."""
    text = log.read_text(errors="replace")[start:]
    steps, lags = slow_steps(text), loop_lags(text)
    floor_ms = float(idle.communicate("")[0]) * 1000
    print(f"   longest event-loop lag: {max(lags, default=0.0) * 1000:.1f} ms (an idle loop beside it: {floor_ms:.1f} ms); "
          f"longest step {steps[0][0] * 1000 if steps else 0:.1f} ms; steps over 50 ms: {sum(s > 0.05 for s, _ in steps)}; "
          f"over 10 ms: {len(steps)}")
    for took, what in steps[:3]:
        print(f"     {took * 1000:6.1f} ms  {what}")


def event_loop(stack: Stack, rounds: int) -> None:
    url = stack.server(write_config(stack.directory / "loop", slow_callback_ms=10), name="loop", env=SRC)
    log = stack.directory / "loop.log"
    start = log.stat().st_size
    bodies = hostile_bodies()
    assert all(len(b) < 1_000_000 for _, b in bodies)
    stop = stack.directory / "loop" / "stop"
    # The prober is its own process: in this one, the clients' threads would delay it (the GIL), not the server.
    prober = subprocess.Popen([sys.executable, "-c", PROBE, url, str(stop)], stdout=subprocess.PIPE, text=True)
    idle = floor()
    time.sleep(1.0)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda item: httpx.post(f"{url}/v1/chat/completions", content=item[1], headers=H, timeout=120),
                                bodies * rounds))
    stop.touch()
    health = json.loads(prober.communicate()[0])
    print(f"\n1. event loop: {len(replies)} hostile requests ({rounds} rounds of {len(bodies)}, 4 at once), all under 1 MB")
    for (name, _), r in zip(bodies, replies):
        print(f"   {name:40s} {r.status_code} {r.json().get('error', {}).get('code') or 'answered'}")
    loop_report(log, start, idle)
    print(f"   /health while they ran: {len(health)} probes, median {statistics.median(health) * 1000:.1f} ms, "
          f"p99 {sorted(health)[int(len(health) * 0.99)] * 1000:.1f} ms, max {max(health) * 1000:.1f} ms")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def heads(stack: Stack, url: str, rounds: int) -> None:
    log = stack.directory / "loop.log"
    start = log.stat().st_size
    pid = httpx.get(f"{url}/health").json()["pid"]
    send_head(url, big_line(1))  # the first refusal's one-off allocations are not a connection's growth
    stop = stack.directory / "loop" / "stop-heads"
    prober = subprocess.Popen([sys.executable, "-c", PROBE, url, str(stop)], stdout=subprocess.PIPE, text=True)
    idle = floor()
    time.sleep(1.0)
    before = _rss_mb(pid)
    jobs = [name for name in HOSTILE_HEADS for _ in range(rounds)]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda name: (name, send_head(url, HOSTILE_HEADS[name]())), jobs))
    grown = _rss_mb(pid) - before
    stop.touch()
    health = json.loads(prober.communicate()[0])
    print(f"\n6. request heads: {len(replies)} hostile connections ({rounds} of each, 4 at once)")
    for name in HOSTILE_HEADS:
        statuses = sorted({int(r.split(b" ", 2)[1]) if r.startswith(b"HTTP/1.1") else 0 for n, r in replies if n == name})
        print(f"   {name:24s} statuses {statuses}")
    loop_report(log, start, idle)
    print(f"   server memory: {before:.1f} MB before, growth {grown:+.1f} MB, {grown / len(replies) * 1024:+.1f} KB per hostile connection")
    if health:  # on a loaded machine the prober may start after the last connection
        print(f"   /health meanwhile: {len(health)} probes, median {statistics.median(health) * 1000:.1f} ms, "
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


SURROGATE = re.compile("[\ud800-\udfff]")
ENTRIES = {
    "chat": ("chat/completions", lambda text: {"model": "moa", "messages": [{"role": "user", "content": text}]}),
    "responses": ("responses", lambda text: {"model": "moa", "input": text}),
    "completions": ("completions", lambda text: {"model": "moa", "prompt": text}),
    "tool result": ("chat/completions", lambda text: {"model": "moa", "messages": [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text}],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}]}),
}


def unicode_entries(url: str, store: Path) -> None:
    bad, runs = 0, 0
    print("\n7. Unicode: a lone surrogate at each entry of a multi-step preset (moa)")
    for entry, (path, build) in ENTRIES.items():
        raw = json.dumps(build("PLACEHOLDER")).encode().replace(b"PLACEHOLDER", b"broken \xed\xa0\x80 text")
        escaped = json.dumps(build("broken \ud800 text")).encode()
        for form, body in (("raw ED A0 80", raw), ("escape \\ud800", escaped)):
            r = httpx.post(f"{url}/v1/{path}", content=body, headers=H, timeout=60)
            trace_id = r.headers.get("x-conductor-trace-id")
            stored = TraceStore(store).get(trace_id).model_dump_json() if trace_id else ""
            kept = bool(SURROGATE.search(json.loads(stored)["question"])) if stored else False
            runs += 1
            bad += r.status_code != 200 or kept
            print(f"   {entry:12s} {form:14s} {r.status_code} stored question has a surrogate: {kept}")
    print(f"   {bad} of {runs} inputs failed a run or reached the store as invalid Unicode")


def _empty_200(r: httpx.Response) -> bool:
    if r.status_code != 200 or "text/event-stream" in r.headers.get("content-type", ""):
        return False
    body = r.json()
    if "choices" in body:
        choice = body["choices"][0]
        return not (choice.get("message", {}).get("content") or choice.get("message", {}).get("tool_calls") or choice.get("text"))
    return not any(part.get("text") for item in body.get("output", []) for part in item.get("content", []) or []) and not any(
        item.get("type") == "function_call" for item in body.get("output", []))


def limits(url: str) -> None:
    n = {"Authorization": "Bearer sk-bench-n"}
    long = {"model": "one", "messages": [{"role": "user", "content": QUESTION * 5}]}
    cases = [
        ("quota: first run (254 a day)", "chat/completions", {"model": "one", "messages": [{"role": "user", "content": QUESTION}]}, n),
        ("quota: 150 left, run needs ~190", "chat/completions", {"model": "one", "messages": [{"role": "user", "content": QUESTION}]}, n),
        ("quota: 150 left, same, streamed", "chat/completions", {"model": "one", "messages": [{"role": "user", "content": QUESTION}], "stream": True}, n),
        ("quota: 150 left, question needs more", "chat/completions", long, n),
        ("conductor.max_tokens = 20", "chat/completions", {"model": "moa", "messages": [{"role": "user", "content": "2+2?"}], "conductor": {"max_tokens": 20}}, H),
        ("conductor.max_tokens = 60 (responses)", "responses", {"model": "moa", "input": "2+2?", "conductor": {"max_tokens": 60}}, H),
        ("max_tokens = 1", "chat/completions", {"model": "moa", "messages": [{"role": "user", "content": "2+2?"}], "max_tokens": 1}, H),
        ("conductor.max_calls = 1 (moa)", "chat/completions", {"model": "moa", "messages": [{"role": "user", "content": "2+2?"}], "conductor": {"max_calls": 1}}, H),
    ]
    empty = 0
    print(f"\n8. limits and quotas: {len(cases)} requests")
    for name, path, body, headers in cases:
        r = httpx.post(f"{url}/v1/{path}", json=body, headers=headers, timeout=60)
        empty += _empty_200(r)
        if r.status_code == 200 and body.get("stream"):
            events = [line[6:] for line in r.text.splitlines() if line.startswith("data: {")]
            error = json.loads(events[-1]).get("error") if events else None
            outcome = f"stream ended with error {error['code']}" if error else "stream answered"
        elif r.status_code == 200:
            j = r.json()
            finish = j["choices"][0]["finish_reason"] if "choices" in j else j["status"]
            outcome = f"finish {finish}, conductor.limit {j['conductor'].get('limit')}"
        else:
            e = r.json()["error"]
            outcome = f"{e['code']} (Retry-After {r.headers.get('retry-after')}) limit {e.get('limit')}"
        print(f"   {name:40s} {r.status_code} {outcome}")
    print(f"   empty 200s: {empty}")


def validation(url: str) -> None:
    ask = {"model": "one", "messages": [{"role": "user", "content": "x"}]}
    tool = {"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}
    cases = {
        "tool parameters of type string": ("post", {**ask, "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "string"}}}]}, H),
        "duplicate tool names": ("post", {**ask, "tools": [tool, tool]}, H),
        "tool_choice required, no tools": ("post", {**ask, "tool_choice": "required"}, H),
        "temperature: true": ("post", {**ask, "temperature": True}, H),
        "max_tokens: \"5\"": ("post", {**ask, "max_tokens": "5"}, H),
        "two Authorization headers": ("post", ask, httpx.Headers([("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {OTHER}")])),
        "/v1/traces?offset=2": ("get", "offset=2", H),
        "/v1/traces?after=<unknown>": ("get", "after=nothing", H),
    }
    refused = 0
    print(f"\n9. validation: {len(cases)} requests OpenAI refuses")
    for name, (method, data, headers) in cases.items():
        if method == "post":
            r = httpx.post(f"{url}/v1/chat/completions", json=data, headers=headers, timeout=60)
        else:
            r = httpx.get(f"{url}/v1/traces?{data}", headers=headers)
        refused += r.status_code == 400
        print(f"   {name:34s} {r.status_code} {r.json().get('error', {}).get('code')}")
    page = httpx.get(f"{url}/v1/traces", params={"limit": 2}, headers=H).json()
    following = httpx.get(f"{url}/v1/traces", params={"limit": 2, "after": page["last_id"]}, headers=H).json()
    print(f"   {refused} of {len(cases)} refused with a 400; paging: page 1 has_more={page['has_more']}, "
          f"page 2 continues it: {bool(following['data']) and following['data'][0]['id'] not in [r['id'] for r in page['data']]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--answered", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--head-rounds", type=int, default=5)
    parser.add_argument("--only-new", action="store_true", help="only issue 70's sections (6 to 9)")
    parser.add_argument("--only-loop", action="store_true", help="only the event-loop sections (1 and 6)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="oc-hostile-"))
    for sub in ("loop", "main", "victim"):
        (directory / sub).mkdir()
    print(f"python {sys.version.split()[0]}; load average before: {open('/proc/loadavg').read().split()[:3]}")
    with Stack(directory) as stack:
        if not args.only_new:
            event_loop(stack, args.rounds)
        else:
            stack.server(write_config(directory / "loop", slow_callback_ms=10), name="loop", env=SRC)
        heads(stack, stack.urls["loop"], args.head_rounds)
        if args.only_loop:
            return
        url = stack.server(write_config(directory / "main"), name="main", env=SRC)
        if not args.only_new:
            malformed(url)
            quota(url, directory / "main" / "traces.sqlite3")
            kill_9(stack, args.answered)
            not_found(url, args.lookups)
        unicode_entries(url, directory / "main" / "traces.sqlite3")
        limits(url)
        validation(url)


if __name__ == "__main__":
    main()
