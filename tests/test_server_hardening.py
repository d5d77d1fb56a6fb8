"""Issue 70's server half on real HTTP (uvicorn on loopback, SIMULATED workers): request head limits (431,
counted before the head is parsed), lone surrogates replaced at every entry, limits and quotas that are
never an empty 200, OpenAI's request validation (tools, tool_choice, numbers, duplicate keys) and
cursor paging of /v1/traces."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import threading
import time

import httpx
import pytest

from _server_kit import HEAD, HOSTILE_HEADS, KEY, OTHER_KEY, big_line, config, send_head, serve, sim_pool
from openconductor.server import hash_key
from openconductor.server.protocol import HeaderLimits, HeadScan
from openconductor.traces import TraceStore

pytestmark = pytest.mark.timeout(90)

H = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
ASK = {"model": "plan", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    keys = [{"name": "alpha", "sha256": hash_key(KEY), "max_concurrent": 8, "requests_per_minute": 60000},
            {"name": "beta", "sha256": hash_key(OTHER_KEY), "max_concurrent": 8, "requests_per_minute": 60000}]
    return config(tmp_path, {"plan": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}},
                             "moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                  keys, server={"traces": str(tmp_path / "traces.sqlite3"), "header_timeout_s": 5})


# --------------------------------------------------------------------------------- header limits


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _status_and_error(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)["error"]


@pytest.mark.parametrize("name", list(HOSTILE_HEADS))
def test_oversized_heads_get_a_json_431_before_they_are_buffered(cfg, name):
    with serve(cfg) as url:
        httpx.get(f"{url}/health")
        before = _rss_kb()
        reply = send_head(url, HOSTILE_HEADS[name]())
        grown_mb = (_rss_kb() - before) / 1024
        after = httpx.get(f"{url}/health")
    status, error = _status_and_error(reply)
    assert status == 431 and error["code"] == "request_headers_too_large", (status, error)
    assert grown_mb < 10, f"{name}: the process grew {grown_mb:.1f} MB"  # a buffered 50 MB line would be 50+
    assert after.status_code == 200


def test_health_stays_fast_while_a_50_mb_header_arrives(cfg):
    with serve(cfg) as url:
        seen: list[float] = []
        stop = threading.Event()

        def probe():
            with httpx.Client() as c:
                while not stop.is_set():
                    t = time.perf_counter()
                    c.get(f"{url}/health")
                    seen.append(time.perf_counter() - t)
                    time.sleep(0.005)

        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(0.2)
        replies = [send_head(url, big_line(50)) for _ in range(3)]
        stop.set()
        prober.join()
    assert all(_status_and_error(r)[0] == 431 for r in replies)
    # Same process as the clients (GIL), on a shared machine: a loose bound. Before the limit the max was 850 ms.
    assert statistics.median(seen) < 0.05 and max(seen) < 0.5, (statistics.median(seen), max(seen))


def test_heads_within_the_limits_are_served(cfg):
    ok = HEAD + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 150) for i in range(90)) + b"X-Long: " + b"w" * 15_000 + b"\r\nConnection: close\r\n\r\n"
    assert len(ok) < 32 * 1024
    with serve(cfg) as url:
        reply = send_head(url, [ok])
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]


def test_header_limits_come_from_the_config_and_hold_for_pipelined_requests(tmp_path):
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": sim_pool(tmp_path), "policy": "moa"}}, keys=[],
                 server={"traces": str(tmp_path / "t.sqlite3"), "max_headers": 10, "max_header_bytes": 2048, "max_header_line_bytes": 512})
    fine = HEAD + b"X-A: 1\r\n\r\n"
    many = HEAD + b"".join(b"X-%d: v\r\n" % i for i in range(11)) + b"\r\n"
    with serve(cfg) as url:
        assert send_head(url, [HEAD + b"X-A: " + b"a" * 600 + b"\r\n\r\n"]).startswith(b"HTTP/1.1 431")
        assert send_head(url, [many]).startswith(b"HTTP/1.1 431")
        assert send_head(url, [HEAD + b"Connection: close\r\n\r\n"]).startswith(b"HTTP/1.1 200")
        # A second request in the same read as the first is counted by the parser's headers instead.
        piped = send_head(url, [fine + many])
    assert piped.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 431" in piped and b"request_headers_too_large" in piped


@pytest.mark.parametrize("chunks, complete, over", [
    ([b"GET / HTTP/1.1\r\nA: b\r\n\r\nBODY"], True, None),
    ([b"GET / HTTP/1.1\r", b"\nA: b\r", b"\n\r", b"\nBODY"], True, None),  # CRLFs split across reads
    ([b"\r\n\r\nGET / HTTP/1.1\nA: b\n\n"], True, None),  # blank lines before a request; bare LFs
    ([b"GET / HTTP/1.1\r\n" + b"A: b\r\n" * 9], False, "more than 8 headers"),
    ([b"GET / HTTP/1.1\r\nA: " + b"b" * 200, b"b" * 60], False, "longer than 256 bytes"),
    ([b"GET / HTTP/1.1\r\n" + b"A: " + b"b" * 200 + b"\r\n"] * 3, False, "larger than 512 bytes"),
])
def test_head_scan_counts_across_reads(chunks, complete, over):
    scan = HeadScan(HeaderLimits(max_bytes=512, max_headers=8, max_line_bytes=256))
    result = (False, None)
    for chunk in chunks:
        result = scan.feed(chunk)
        if result != (False, None):
            break
    assert result[0] is complete
    assert (result[1] is None) if over is None else (over in result[1])


# ------------------------------------------------------------------------------------- Unicode


ENTRIES = {
    "chat": ("/v1/chat/completions", lambda text: {"model": "plan", "messages": [{"role": "user", "content": text}]}),
    "responses": ("/v1/responses", lambda text: {"model": "plan", "input": text}),
    "completions": ("/v1/completions", lambda text: {"model": "plan", "prompt": text}),
    "tool result": ("/v1/chat/completions", lambda text: {"model": "plan", "messages": [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text}],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}]}),
}


def _with_raw_bytes(body: dict) -> bytes:
    """``body`` as JSON whose PLACEHOLDER string is replaced by raw bytes ED A0 80 (not an escape)."""
    return json.dumps(body).encode().replace(b"PLACEHOLDER", b"broken \xed\xa0\x80 and \xed\xb0\x80 text")


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("form", ["raw bytes", "escapes"])
def test_lone_surrogates_are_replaced_at_every_entry(cfg, entry, form):
    path, build = ENTRIES[entry]
    if form == "raw bytes":
        body = _with_raw_bytes(build("PLACEHOLDER"))
    else:
        body = json.dumps(build("broken \ud800 and \udc00 text")).encode()  # json.dumps writes \\ud800 escapes
    with serve(cfg) as url:
        r = httpx.post(f"{url}{path}", content=body, headers=H, timeout=30)
        assert r.status_code == 200, r.text  # before: 502 run_plan_failed, "'utf-8' codec can't encode character"
        trace_id = r.headers["x-conductor-trace-id"]
        live = httpx.get(f"{url}/v1/traces/{trace_id}", headers=H).json()
    saved = TraceStore(cfg.server.traces).get(trace_id)
    for question in (saved.question, live["question"]):
        assert "broken \ufffd and \ufffd text" in question
        assert not any("\ud800" <= ch <= "\udfff" for ch in question)
    assert not any("\ud800" <= ch <= "\udfff" for ch in saved.model_dump_json())


def test_the_in_process_client_replaces_lone_surrogates_too(cfg):
    from openconductor.server.client import AsyncOpenConductor

    async def ask():
        async with AsyncOpenConductor(cfg) as oc:
            reply = await oc.chat.completions.create(model="plan", messages=[{"role": "user", "content": "broken \ud800 text"}])
            return reply, await oc.gateway.runtime.get_run(reply.conductor["trace_id"])

    reply, run = asyncio.run(ask())
    assert reply.choices[0].message.content and run.question == "broken \ufffd text"


# ---------------------------------------------------------------------------- limits and quotas


QUESTION = {"model": "one", "messages": [{"role": "user", "content": "Explain the answer to 2 + 2 at length. " * 3}]}


def quota_cfg(tmp_path, tokens_per_day: int):
    """A preset running one simulated call (104 tokens for QUESTION)."""
    keys = [{"name": "alpha", "sha256": hash_key(KEY), "max_concurrent": 8, "requests_per_minute": 6000, "tokens_per_day": tokens_per_day}]
    models = {"one": {"version": "v1", "pool": sim_pool(tmp_path), "policy": "single", "policy_options": {"worker": "alpha"}},
              "plan": {"version": "v1", "pool": sim_pool(tmp_path, name="plan"), "policy": "conductor"}}
    return config(tmp_path, models, keys, server={"traces": str(tmp_path / "traces.sqlite3")})


def _is_quota_429(r: httpx.Response, code: str = "insufficient_quota") -> bool:
    return (r.status_code == 429 and r.json()["error"]["code"] == code and int(r.headers["retry-after"]) >= 1
            and r.json()["error"]["type"] == ("insufficient_quota" if code == "insufficient_quota" else "rate_limit_error"))


@pytest.mark.parametrize("stream", [False, True])
def test_a_nearly_spent_quota_is_a_429_not_an_empty_200(tmp_path, stream):
    """The issue's case: tokens left, but fewer than a run needs to start, answered 200 with an empty message.
    Here 196 are left and the question alone needs more."""
    cfg = quota_cfg(tmp_path, 300)
    long = {**QUESTION, "messages": [{"role": "user", "content": "Explain the answer to 2 + 2 at length. " * 15}], "stream": stream}
    with serve(cfg) as url:
        first = httpx.post(f"{url}/v1/chat/completions", json=QUESTION, headers=H, timeout=30)
        second = httpx.post(f"{url}/v1/chat/completions", json=long, headers=H, timeout=30)
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] == 104
    assert _is_quota_429(second), second.text  # refused before a stream starts, so streaming or not
    message = second.json()["error"]["message"]
    assert "196 tokens left" in message and int(re.search(r"needs at least (\d+)", message).group(1)) > 196, message


def test_a_run_the_quota_stops_before_any_answer_is_a_429(tmp_path):
    """Enough left (150) to pass the estimate at the door, too little for the worker's real prompt (a run needs
    over 190): the run stops before its first call, and that is a 429 with the trace id, not an empty 200."""
    cfg = quota_cfg(tmp_path, 104 + 150)
    with serve(cfg) as url:
        first = httpx.post(f"{url}/v1/chat/completions", json=QUESTION, headers=H, timeout=30)
        r = httpx.post(f"{url}/v1/chat/completions", json=QUESTION, headers=H, timeout=30)
        streamed = httpx.post(f"{url}/v1/chat/completions", json={**QUESTION, "stream": True}, headers=H, timeout=30)
        responses = httpx.post(f"{url}/v1/responses", json={"model": "one", "input": QUESTION["messages"][0]["content"]}, headers=H)
    assert first.status_code == 200
    for reply in (r, responses):
        assert _is_quota_429(reply), reply.text
        error = reply.json()["error"]
        assert error["limit"] == {"name": "max_tokens", "value": 150, "source": "quota"} and error["trace_id"]
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == "insufficient_quota"
    assert not any('"finish_reason":"length"' in e.replace(" ", "") for e in events)


@pytest.mark.parametrize("want, used, held, expect", [
    (None, 0, 0, (300, False)), (60, 0, 0, (60, False)), (60, 0, 260, (40, True)), (None, 100, 50, (150, True)),
    (60, 200, 0, (60, False)), (None, 280, 0, (20, False)),
])
def test_a_reservation_says_when_other_requests_made_it_smaller(want, used, held, expect):
    from openconductor.budget import Limits
    from openconductor.server.auth import Key
    from openconductor.server.counters import reservation

    key = Key("k", Limits(), 4, 1.0, 1.0, tokens_per_day=300)
    tokens, _cost, squeezed = reservation(key, Limits(max_tokens=want) if want else None, (used, 0.0), (held, 0.0), 0.0)
    assert (tokens, squeezed) == expect


def test_a_request_budget_below_one_step_is_a_400_naming_it(cfg):
    with serve(cfg) as url:
        low = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "conductor": {"max_tokens": 20}}, headers=H)
        responses = httpx.post(f"{url}/v1/responses", json={"model": "plan", "input": "What is 2 + 2?", "conductor": {"max_tokens": 20}},
                               headers=H)
        # Passes the estimate at the door, but the planner's prompt is longer: the run stops at once, the same 400.
        started = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "conductor": {"max_tokens": 60}}, headers=H)
    for r in (low, responses, started):
        error = r.json()["error"]
        assert r.status_code == 400 and error["code"] == "limit_too_low" and error["param"] == "conductor.max_tokens", r.text
    assert started.json()["error"]["limit"]["source"] == "request"


def test_a_run_cut_after_it_answered_says_so(cfg):
    """The two-step plan with one call allowed: the first step's answer comes back, marked as cut by max_calls."""
    with serve(cfg) as url:
        chat = httpx.post(f"{url}/v1/chat/completions", json={**ASK, "conductor": {"max_calls": 1}}, headers=H).json()
        resp = httpx.post(f"{url}/v1/responses", json={"model": "plan", "input": "What is 2 + 2?", "conductor": {"max_calls": 1}},
                          headers=H).json()
        whole = httpx.post(f"{url}/v1/chat/completions", json=ASK, headers=H).json()
    assert chat["choices"][0]["message"]["content"] and chat["choices"][0]["finish_reason"] == "length"
    assert chat["conductor"]["status"] == "limit" and chat["conductor"]["limit"] == {"name": "max_calls", "value": 1, "source": "request"}
    assert resp["status"] == "incomplete" and resp["conductor"]["limit"]["name"] == "max_calls" and resp["output"][0]["content"][0]["text"]
    assert whole["choices"][0]["finish_reason"] == "stop" and whole["conductor"]["limit"] is None


# ---------------------------------------------------------------------------------- validation


TOOL = {"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("path, body, code, param", [
    ("chat/completions", {**ASK, "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "string"}}}]},
     "invalid_function_parameters", "tools[0].function.parameters"),
    ("chat/completions", {**ASK, "tools": [{"type": "function", "function": {"name": "w", "parameters": {"properties": {"a": {}}}}}]},
     "invalid_function_parameters", "tools[0].function.parameters"),
    ("chat/completions", {**ASK, "functions": [{"name": "w", "parameters": {"type": "array"}}]}, "invalid_function_parameters",
     "functions[0].parameters"),
    ("responses", {"model": "plan", "input": "q", "tools": [{"type": "function", "name": "w", "parameters": {"type": "integer"}}]},
     "invalid_function_parameters", "tools[0].parameters"),
    ("chat/completions", {**ASK, "tools": [TOOL, TOOL]}, "duplicate_tool_name", "tools[1]"),
    ("responses", {"model": "plan", "input": "q", "tools": [{"type": "function", "name": "w"}] * 2}, "duplicate_tool_name", "tools[1]"),
    ("chat/completions", {**ASK, "tool_choice": "required"}, "invalid_request", "tool_choice"),
    ("responses", {"model": "plan", "input": "q", "tool_choice": "required"}, "invalid_request", "tool_choice"),
    ("chat/completions", {**ASK, "temperature": True}, "invalid_request", "temperature"),
    ("chat/completions", {**ASK, "top_p": False}, "invalid_request", "top_p"),
    ("chat/completions", {**ASK, "max_tokens": True}, "invalid_request", "max_tokens"),
    ("chat/completions", {**ASK, "temperature": "0.5"}, "invalid_request", "temperature"),
    ("chat/completions", {**ASK, "seed": True}, "invalid_request", "seed"),
    ("responses", {"model": "plan", "input": "q", "temperature": True}, "invalid_request", "temperature"),
    ("responses", {"model": "plan", "input": "q", "max_output_tokens": False}, "invalid_request", "max_output_tokens"),
    ("completions", {"model": "plan", "prompt": "q", "presence_penalty": True}, "invalid_request", "presence_penalty"),
    ("chat/completions", {**ASK, "conductor": {"max_calls": True}}, "invalid_request", "conductor.max_calls"),
])
def test_requests_openai_refuses_are_400s(cfg, path, body, code, param):
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/{path}", json=body, headers=H)
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["param"]) == (code, param), r.text


def test_what_openai_accepts_still_is(cfg):
    with serve(cfg) as url:
        replies = [httpx.post(f"{url}/v1/chat/completions", json=body, headers=H) for body in (
            {**ASK, "temperature": 1, "top_p": 0.5, "max_tokens": 50, "seed": 3},
            {**ASK, "tools": [TOOL, {"type": "function", "function": {"name": "v", "parameters": {}}}], "tool_choice": "required"},
            {**ASK, "tool_choice": "none"},
        )]
    assert [r.status_code for r in replies] == [200, 200, 200], [r.text[:200] for r in replies]


@pytest.mark.parametrize("headers", [
    [("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {OTHER_KEY}")],
    [("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {KEY}")],
    [("api-key", KEY), ("x-api-key", OTHER_KEY)],
    [("api-key", KEY), ("api-key", OTHER_KEY)],
])
def test_two_api_keys_in_one_request_are_refused(cfg, headers):
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json=ASK, headers=httpx.Headers(headers))
        models = httpx.get(f"{url}/v1/models", headers=httpx.Headers(headers))
        same = httpx.get(f"{url}/v1/models", headers=httpx.Headers([("api-key", KEY), ("x-api-key", KEY)]))
    for reply in (r, models):
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "ambiguous_api_key", reply.text
    assert same.status_code == 200  # one key, sent in both of the other headers


# ---------------------------------------------------------------------------------- trace pages


def test_traces_page_with_a_cursor_and_refuse_unknown_parameters(cfg):
    with serve(cfg) as url:
        for i in range(5):
            assert httpx.post(f"{url}/v1/chat/completions", json={**ASK, "messages": [{"role": "user", "content": f"q {i}"}]},
                              headers=H).status_code == 200
        httpx.post(f"{url}/v1/chat/completions", json=ASK, headers={"Authorization": f"Bearer {OTHER_KEY}"})
        pages, after = [], None
        while True:
            page = httpx.get(f"{url}/v1/traces", params={"limit": 2, **({"after": after} if after else {})}, headers=H).json()
            pages.append(page)
            if not page["has_more"]:
                break
            after = page["last_id"]
        everything = httpx.get(f"{url}/v1/traces", headers=H).json()
        offset = httpx.get(f"{url}/v1/traces", params={"offset": 2}, headers=H)
        theirs = httpx.get(f"{url}/v1/traces", params={"limit": 1}, headers={"Authorization": f"Bearer {OTHER_KEY}"}).json()["last_id"]
        foreign = httpx.get(f"{url}/v1/traces", params={"after": theirs}, headers=H)
    assert [len(p["data"]) for p in pages] == [2, 2, 1] and [p["has_more"] for p in pages] == [True, True, False]
    paged = [r["id"] for p in pages for r in p["data"]]
    assert paged == [r["id"] for r in everything["data"]] and len(set(paged)) == 5
    assert everything["has_more"] is False and everything["first_id"] == paged[0] and everything["last_id"] == paged[-1]
    assert offset.status_code == 400 and offset.json()["error"]["code"] == "unknown_parameter" and offset.json()["error"]["param"] == "offset"
    assert foreign.status_code == 400 and foreign.json()["error"]["code"] == "invalid_cursor"
