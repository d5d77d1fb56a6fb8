"""Hostile requests on real HTTP (uvicorn on loopback): every malformed request is a 4xx JSON error,
slow clients are cut off, caller schemas are checked at the door, quotas hold under concurrency, and
another key's runs are looked up by the same path as runs that do not exist."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import httpx
import pytest

from _server_kit import KEY, OTHER_KEY, config, serve, sim_pool
from openconductor.server import create_app, hash_key

H = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
ASK = {"model": "moa", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    return config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                  server={"traces": str(tmp_path / "traces.sqlite3"), "header_timeout_s": 1.5, "body_timeout_s": 1.5})


def raw(url: str, data: bytes, *, then: list[bytes] = (), every: float = 0.25, timeout: float = 20) -> tuple[list, float]:
    """Send ``data`` on a fresh connection, then each of ``then`` every ``every`` s while the server is quiet;
    read until it closes. Returns ([(status, headers, body)] for each response, seconds until closed)."""
    u = urlparse(url)
    start = time.monotonic()
    got = b""
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as s:
        s.sendall(data)
        s.settimeout(every)
        pending = list(then)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if time.monotonic() - start > timeout:
                    raise AssertionError("the server held the connection open") from None
                if pending:
                    try:
                        s.sendall(pending.pop(0))
                    except OSError:
                        pass
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    return parse_responses(got), time.monotonic() - start


def parse_responses(data: bytes) -> list[tuple[int, dict, bytes]]:
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        size = int(headers.get("content-length", len(rest)))
        out.append((int(lines[0].split()[1]), headers, rest[:size]))
        data = rest[size:]
    return out


def json_error(status: int, headers: dict, body: bytes) -> dict:
    assert 400 <= status < 500, (status, body)
    assert headers.get("content-type", "").startswith("application/json"), headers
    error = json.loads(body)["error"]
    assert error["message"] and error["type"], error
    return error


# ------------------------------------------------------------------------------- malformed bodies


@pytest.mark.parametrize("body, code", [
    (b'{"model": "moa", "metadata": ' + b"[" * 980 + b"]" * 980 + b"}", "json_too_deep"),  # 2 KB
    (b"[" * 200_000, "json_too_deep"),  # never closed
    (json.dumps({**ASK, "messages": [{"role": "user", "content": "x"}] * 25_000}).encode(), "json_too_large"),  # 0.8 MB
    (b'{"model": "moa", "messages": [{"role": "user", "content": "x"}], "seed": ' + b"7" * 5000 + b"}", "invalid_json"),
    (b'{"model": "moa", "temperature": NaN}', "invalid_json"),
    (b'{"model": "moa", "temperature": 1e400}', "invalid_json"),
    (b'{"model": "moa", "messages": [{"role": "user", "content": "\xff\xfe"}]}', "invalid_json"),
    (b"", "empty_body"),
    (b"{not json", "invalid_json"),
    (b'"a string"', "invalid_json"),
])
def test_malformed_bodies_are_4xx_json_errors(cfg, body, code):
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/chat/completions", content=body, headers=H)
        health = httpx.get(f"{url}/health")  # the server is still there
    error = json_error(r.status_code, r.headers, r.content)
    assert error["code"] == code, error
    assert health.status_code == 200


@pytest.mark.parametrize("head", [
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
    b"GARBAGE\r\n\r\n",
])
def test_requests_uvicorn_cannot_parse_get_a_json_400(cfg, head):
    with serve(cfg) as url:
        [(status, headers, body)], _ = raw(url, head)
    assert status == 400
    assert json_error(status, headers, body)["code"] == "invalid_http"
    assert headers.get("connection") == "close"


def test_a_body_longer_than_its_content_length_is_a_json_error(cfg):
    body = json.dumps(ASK).encode()
    with serve(cfg) as url:
        # the rest after the declared 10 bytes is read as a next request, which is not HTTP: the parser
        # stops the connection (before or after the first request's own 400, as the bytes arrive)
        responses, _ = raw(url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                           + b"\r\nContent-Length: 10\r\n\r\n" + body)
    codes = [json_error(*r)["code"] for r in responses]
    assert codes[-1] == "invalid_http" and set(codes) <= {"invalid_json", "invalid_http"}, codes


# --------------------------------------------------------------------------------- slow clients


def test_a_slow_body_gets_a_408_and_loses_its_connection(cfg):
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    with serve(cfg) as url:
        # one byte of 1,000, then one more every 0.25 s: each arrives well within any idle timeout
        [(status, headers, body)], elapsed = raw(url, head, then=[b" "] * 100)
    assert status == 408 and json_error(status, headers, body)["code"] == "body_timeout"
    assert headers.get("connection") == "close"
    assert elapsed < 4.0  # body_timeout_s = 1.5 (10 s by default); it used to hold the connection > 20 s


def test_slow_headers_get_a_408_and_lose_their_connection(cfg):
    with serve(cfg) as url:
        [(status, headers, body)], elapsed = raw(url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", then=[b"X-Slow: a\r\n"] * 100)
        idle, idle_s = raw(url, b"", timeout=20)
    assert status == 408 and json_error(status, headers, body)["code"] == "header_timeout"
    assert elapsed < 4.0  # header_timeout_s = 1.5
    assert idle == [] and idle_s < 4.0  # a connection that never sent a byte is closed, silently


def test_keep_alive_requests_still_work(cfg):
    with serve(cfg) as url, httpx.Client(base_url=url, headers=H) as client:
        first = client.post("/v1/chat/completions", json=ASK)
        time.sleep(0.5)
        second = client.post("/v1/chat/completions", json=ASK)
    assert first.status_code == second.status_code == 200


# ----------------------------------------------------------------------------------- schemas


def _chat_tool(schema):
    return {**ASK, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}


SCHEMA_PLACES = [
    ("chat/completions", _chat_tool, "tools[0].function.parameters"),
    ("chat/completions", lambda s: {**ASK, "functions": [{"name": "f", "parameters": s}]}, "functions[0].parameters"),
    ("chat/completions", lambda s: {**ASK, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": s}}},
     "response_format.json_schema.schema"),
    ("responses", lambda s: {"model": "moa", "input": "q", "tools": [{"type": "function", "name": "f", "parameters": s}]}, "tools[0].parameters"),
    ("responses", lambda s: {"model": "moa", "input": "q", "text": {"format": {"type": "json_schema", "name": "r", "schema": s}}},
     "text.format.schema"),
]


@pytest.mark.parametrize("schema, words", [
    ({"type": "banana"}, "at type: 'banana' is not a JSON Schema type"),
    ({"type": "object", "properties": {"a": 5}}, "at properties.a: 5 is not of type"),
    ({"$ref": "#"}, "$ref cycle"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}}, "at properties.a.$ref: $ref '#/$defs/gone' points at nothing"),
])
def test_caller_schemas_are_checked_at_the_door(cfg, schema, words):
    with serve(cfg) as url:
        replies = [(param, httpx.post(f"{url}/v1/{path}", json=body(schema), headers=H)) for path, body, param in SCHEMA_PLACES]
    for param, r in replies:
        error = json_error(r.status_code, r.headers, r.content)
        assert error["code"] == "invalid_json_schema" and error["param"] == param, error
        assert words in error["message"], error["message"]


def test_a_recursive_tool_schema_is_accepted_and_runs(cfg):
    tree = {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json=_chat_tool(tree), headers=H)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "f"


def big_schema(properties: int, pad: int = 60) -> dict:
    return {"type": "object", "properties": {f"field_{i:05d}": {"type": "string", "description": "d" * pad} for i in range(properties)}}


def test_a_big_schema_does_not_stall_the_server(cfg):
    """The issue's 0.88 MB schema with 10,000 properties took 12.2 s and stalled /health up to 3.4 s."""
    huge = {**ASK, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": big_schema(10_000, 34)}}}
    near_cap = {**ASK, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": big_schema(1_200, 20)}}}
    assert 850_000 < len(json.dumps(huge)) < 1_000_000
    worst = []
    with serve(cfg) as url:
        done = threading.Event()

        def probe():
            with httpx.Client() as c:
                while not done.is_set():
                    start = time.perf_counter()
                    c.get(f"{url}/health")
                    worst.append(time.perf_counter() - start)
                    time.sleep(0.01)

        prober = threading.Thread(target=probe)
        prober.start()
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda body: httpx.post(f"{url}/v1/chat/completions", json=body, headers=H, timeout=60),
                                    [huge, near_cap, huge, near_cap]))
        done.set()
        prober.join()
    assert [r.status_code for r in replies] == [400, 200, 400, 200], [r.text[:200] for r in replies]
    assert "more than 20,000 JSON values" in replies[0].json()["error"]["message"]  # the body's cap comes first
    assert len(json.loads(replies[1].json()["choices"][0]["message"]["content"])) == 1_200
    # Loose here (a shared CI machine); the strict event-loop measure is in test_server_crash.py.
    assert max(worst) < 0.5, f"/health took up to {max(worst):.3f} s"


# ------------------------------------------------------------------------------------- quotas


def quota_cfg(tmp_path, tokens_per_day: int):
    """Presets running one simulated call (it uses 104 tokens and needs a budget of about 200 to start)."""
    keys = [{"name": "alpha", "sha256": hash_key(KEY), "max_concurrent": 8, "requests_per_minute": 6000, "tokens_per_day": tokens_per_day}]
    models = {name: {"version": "v1", "pool": sim_pool(tmp_path, latency=latency, name=f"sim-{name}"), "policy": "single",
                     "policy_options": {"worker": "alpha"}} for name, latency in (("one", 0.5), ("slow", 2.0))}
    return config(tmp_path, models, keys, server={"traces": str(tmp_path / "traces.sqlite3")})


QUESTION = {"model": "one", "messages": [{"role": "user", "content": "Explain the answer to 2 + 2 at length. " * 3}]}


def _ledger(cfg) -> tuple[int, int]:
    """(tokens charged, tokens held by requests in flight) today, read from the store's table."""
    with sqlite3.connect(cfg.server.traces) as db:
        row = db.execute("SELECT tokens, held_tokens FROM quota_days WHERE api_key = 'alpha'").fetchone()
    return (row[0], row[1]) if row else (0, 0)


@pytest.mark.parametrize("per_request", [None, 220])
def test_concurrent_requests_never_spend_more_than_the_quota(tmp_path, per_request):
    """The issue's case: 3 requests at once against tokens_per_day = 300 were each admitted with the whole
    300 and charged 684 together. Here each run alone spends 104 tokens: 3 x 104 would be 312."""
    cfg = quota_cfg(tmp_path, 300)
    body = {**QUESTION, "conductor": {"max_tokens": per_request}} if per_request else QUESTION
    with serve(cfg) as url:
        barrier = threading.Barrier(3)

        def ask(_):
            barrier.wait()
            return httpx.post(f"{url}/v1/chat/completions", json=body, headers=H, timeout=60)

        with ThreadPoolExecutor(3) as pool:
            replies = list(pool.map(ask, range(3)))
        traces = httpx.get(f"{url}/v1/traces", headers=H).json()["data"]
    spent = sum(t["tokens"] for t in traces)
    assert (spent, 0) == _ledger(cfg), _ledger(cfg)  # charged what the runs used; nothing left held
    assert 104 <= spent <= 300
    # The others were refused (the rest is held by the first) or got what was left, too little to start a call:
    # a 429 too (issue 70: never an empty 200).
    others = [r for r in replies if r.status_code != 200]
    assert len(others) >= 1, [r.text[:200] for r in replies]
    assert all(r.status_code != 200 or r.json()["usage"]["total_tokens"] > 0 for r in replies)
    for r in others:
        assert r.status_code == 429 and r.json()["error"]["code"] == "quota_reserved" and "in flight" in r.json()["error"]["message"], r.text
    if per_request is None:  # the first reserved the whole day
        assert [r.status_code for r in replies].count(429) == 2


def test_the_quota_survives_a_restart_without_redis(tmp_path):
    cfg = quota_cfg(tmp_path, 1000)
    with serve(cfg) as url:
        assert [httpx.post(f"{url}/v1/chat/completions", json=QUESTION, headers=H).status_code for _ in range(2)] == [200, 200]
    assert _ledger(cfg) == (208, 0)
    with serve(cfg) as url:  # a new server on the same store: the day's use is still there, and only the rest is reserved
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(httpx.post, f"{url}/v1/chat/completions", json={**QUESTION, "model": "slow"}, headers=H, timeout=60)
            deadline = time.monotonic() + 10
            while _ledger(cfg)[1] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            held = _ledger(cfg)
            assert slow.result().status_code == 200
    assert held == (208, 1000 - 208)
    assert _ledger(cfg) == (312, 0)


# ----------------------------------------------------------------------------------- trace ids


def test_another_keys_run_takes_the_path_of_no_run(tmp_path):
    pool = sim_pool(tmp_path)
    keys = [{"name": "alpha", "sha256": hash_key(KEY)}, {"name": "beta", "sha256": hash_key(OTHER_KEY)}]
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}}, keys, server={"traces": str(tmp_path / "t.sqlite3")})
    app = create_app(cfg)
    store = app.state.runtime.store
    queries: list[str] = []
    real_query = store._query

    def recording(sql, args=()):  # instrumentation, not a mock: every query still runs on the real store
        queries.append(sql)
        return real_query(sql, args)

    store._query = recording
    from _server_kit import running

    with running(app) as url:
        theirs = httpx.post(f"{url}/v1/chat/completions", json=ASK, headers=H).json()["conductor"]["trace_id"]
        app.state.runtime.recent.clear()  # as after a restart: the lookup goes to the store
        prefix = next(p for p in ("0123", "4567", "89ab", "cdef") if not theirs.startswith(p))
        results = {}
        for name, run_id in (("other key's prefix", theirs[:6]), ("other key's id", theirs), ("nothing", prefix)):
            queries.clear()
            r = httpx.get(f"{url}/v1/traces/{run_id}", headers={"Authorization": f"Bearer {OTHER_KEY}"})
            results[name] = (r.status_code, r.json()["error"]["code"], list(queries))
        own = httpx.get(f"{url}/v1/traces/{theirs[:6]}", headers={"Authorization": f"Bearer {KEY}"})
    assert own.status_code == 200
    assert len({repr(v) for v in results.values()}) == 1, results  # same status, same error, same queries
    assert results["nothing"][0] == 404 and all("api_key = ?" in q for q in results["nothing"][2])


def test_a_killed_check_process_is_replaced(cfg):
    app = create_app(cfg)
    from _server_kit import running

    tools = _chat_tool({"type": "object", "properties": {"a": {"type": "string"}}})  # a schema: checked in the process
    with running(app) as url:
        assert httpx.post(f"{url}/v1/chat/completions", json=tools, headers=H).status_code == 200
        for pid in list(app.state.gateway.checks._pool._processes):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        first = httpx.post(f"{url}/v1/chat/completions", json=tools, headers=H)
        then = httpx.post(f"{url}/v1/chat/completions", json=tools, headers=H)
        small = httpx.post(f"{url}/v1/chat/completions", json=ASK, headers=H)  # no schema, small: checked on the loop
    assert first.status_code in (200, 503) and then.status_code == 200 and small.status_code == 200
    if first.status_code == 503:
        assert first.json()["error"]["code"] == "checker_restarted" and first.headers["retry-after"] == "1"
