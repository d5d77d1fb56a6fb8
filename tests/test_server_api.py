"""The server as users use it: real uvicorn on loopback, called with the official openai client."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest

from _server_kit import KEY, OTHER_KEY, config, serve, sim_pool, sim_worker, write_pool
from openconductor.executor import clean_answer
from openconductor.server import hash_key

pytestmark = pytest.mark.timeout(60)


def client(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)


def trace(url: str, run_id: str, key: str = KEY) -> dict:
    r = httpx.get(f"{url}/v1/traces/{run_id}", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    return config(tmp_path, {
        "conductor": {"version": "2026-11-22", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}},
        "moa": {"version": "v1", "pool": pool, "policy": "moa", "limits": {"max_calls": 6, "max_depth": 0}},
    })


# ------------------------------------------------------------------------------------------- answers


def test_chat_completion_answer_usage_and_trace(cfg):
    with serve(cfg) as url:
        raw = client(url).chat.completions.with_raw_response.create(
            model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
        resp = raw.parse()
        trace_id = raw.headers["x-conductor-trace-id"]
        run = trace(url, trace_id)
    assert resp.object == "chat.completion" and resp.model == "conductor"
    assert resp.choices[0].finish_reason == "stop"
    # The conductor's plan: alpha drafts, beta finalises; the answer is beta's output.
    assert [s["worker_name"] for s in run["steps"]] == ["alpha", "beta"]
    assert run["steps"][1]["access"] == "all" and run["status"] == "ok"
    assert resp.choices[0].message.content == run["final_answer"] == clean_answer(run["steps"][1]["output"])
    assert resp.choices[0].message.content.startswith("beta answer")
    ext = resp.model_extra["conductor"]
    assert ext["trace_id"] == trace_id == run["id"] and ext["status"] == "ok" and ext["version"] == "2026-11-22"
    assert [w["worker"] for w in ext["workflow"]] == ["alpha", "beta"]
    # usage: totals plus the breakdown, straight from Run.totals
    totals = run["totals"]
    u = resp.usage
    worker_tokens = totals["worker_usage"]["input_tokens"] + totals["worker_usage"]["output_tokens"]
    conductor_tokens = totals["conductor_usage"]["input_tokens"] + totals["conductor_usage"]["output_tokens"]
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens == worker_tokens + conductor_tokens
    assert u.model_extra["worker_tokens"] == worker_tokens and u.model_extra["conductor_tokens"] == conductor_tokens > 0
    assert set(u.model_extra["per_worker"]) == {"alpha", "beta"}
    assert u.model_extra["worker_calls"] == 2
    assert u.model_extra["cost_usd"] == pytest.approx(totals["worker_usage"]["cost_usd"] + totals["conductor_usage"]["cost_usd"])
    assert u.model_extra["cost_usd"] > 0  # the simulated workers have prices
    assert resp.system_fingerprint.startswith("fp_")


def test_async_client_concurrent_requests(cfg):
    async def go(url):
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as c:
            return await asyncio.gather(*(
                c.chat.completions.create(model="moa", messages=[{"role": "user", "content": f"question {i}"}]) for i in range(6)))

    with serve(cfg) as url:
        results = asyncio.run(go(url))
        runs = [trace(url, r.model_extra["conductor"]["trace_id"]) for r in results]
    assert len({r.id for r in results}) == 6
    for r, run in zip(results, runs):
        assert r.choices[0].message.content == run["final_answer"] != ""
        assert len(run["steps"]) == 3  # moa: two proposers and an aggregator
        assert run["question"].startswith("question ")


def test_multi_turn_conversation_becomes_the_task(cfg):
    messages = [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Name a prime number."},
        {"role": "assistant", "content": "Seven."},
        {"role": "user", "content": [{"type": "text", "text": "Now name a larger one."}]},
    ]
    with serve(cfg) as url:
        resp = client(url).chat.completions.create(model="moa", messages=messages)
        run = trace(url, resp.model_extra["conductor"]["trace_id"])
    q = run["question"]
    assert "Answer in one word." in q and "User: Name a prime number." in q and "Assistant: Seven." in q
    assert q.rstrip().endswith("Now name a larger one.")
    assert q.index("Seven.") < q.index("Now name a larger one.")
    # the workers saw it as the overall task
    assert "Assistant: Seven." in run["steps"][0]["messages"][0]["content"]


def test_models_list_and_pinned_versions(cfg):
    with serve(cfg) as url:
        c = client(url)
        ids = [m.id for m in c.models.list()]
        assert ids == ["conductor", "conductor@2026-11-22", "moa", "moa@v1"]
        pinned = c.chat.completions.create(model="moa@v1", messages=[{"role": "user", "content": "hi"}])
        assert pinned.model == "moa@v1" and pinned.choices[0].message.content
        with pytest.raises(openai.NotFoundError) as stale:
            c.chat.completions.create(model="moa@v0", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert stale.value.body["code"] == "model_not_found" and "moa" in stale.value.body["message"]


def test_fingerprint_changes_when_the_pool_changes(tmp_path):
    from openconductor.server.runs import fingerprint

    pool = sim_pool(tmp_path)
    a = config(tmp_path, {"m": {"version": "v1", "pool": pool, "policy": "moa"}})
    before = fingerprint(a.models["m"], a.pool_spec(a.models["m"]))
    (tmp_path / pool).write_text((tmp_path / pool).read_text().replace("latency_s: 0.02", "latency_s: 0.03"))
    b = config(tmp_path, {"m": {"version": "v1", "pool": pool, "policy": "moa"}})
    assert before != fingerprint(b.models["m"], b.pool_spec(b.models["m"]))
    assert before == fingerprint(a.models["m"], a.pool_spec(a.models["m"]).model_copy(
        update={"workers": [w.model_copy(update={"options": {"latency_s": 0.02}}) for w in a.pool_spec(a.models["m"]).workers]}))


# ----------------------------------------------------------------------------------------- streaming


def test_streaming_order_tokens_and_done(cfg):
    with serve(cfg) as url:
        chunks = list(client(url).chat.completions.create(
            model="conductor", messages=[{"role": "user", "content": "Stream me an answer."}], stream=True))
        with httpx.stream("POST", f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                          json={"model": "conductor", "stream": True, "messages": [{"role": "user", "content": "raw"}]}) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        trace_id = chunks[0].model_extra["conductor"]["trace_id"]
        run = trace(url, trace_id)
    events = [(i, c.model_extra.get("conductor", {}).get("event")) for i, c in enumerate(chunks)]
    content_at = [i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content]
    finished = [(i, c.model_extra["conductor"]) for i, c in enumerate(chunks) if c.model_extra.get("conductor", {}).get("event") == "step_finished"]
    assert events[0][1] == "run_started" and chunks[0].choices[0].delta.role == "assistant"
    assert [e for _, e in events if e][:3] == ["run_started", "plan", "step_started"]
    # the draft step is announced (with its output) before any token of the final answer
    first_step = next(ext for i, ext in finished if ext["index"] == 0)
    assert first_step["worker"] == "alpha" and first_step["output"] == run["steps"][0]["output"]
    assert max(i for i, ext in finished if ext["index"] == 0) < min(content_at)
    assert len(content_at) >= 3  # the final step's words arrive as separate chunks
    text = "".join(chunks[i].choices[0].delta.content for i in content_at)
    assert text == run["final_answer"] and text.startswith("beta answer")
    # the finish chunk carries the run's summary; without include_usage no chunk has empty choices
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and all(c.choices for c in chunks)
    assert last.model_extra["conductor"]["event"] == "run_finished" and last.model_extra["conductor"]["streamed_matches_final"] is True
    assert lines[-1] == "data: [DONE]" and sum(line == "data: [DONE]" for line in lines) == 1
    assert all(c.choices[0].delta.content is not None or c.choices[0].delta.content is None for c in chunks)  # the usual loop works


def test_stream_usage_chunk_only_with_include_usage(cfg):
    with serve(cfg) as url:
        chunks = list(client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], stream=True,
                                                          stream_options={"include_usage": True}))
        plain = list(client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], stream=True))
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens > 0 and chunks[-1].usage.model_extra["per_worker"].keys() == {"alpha", "beta"}
    text = "".join(c.choices[0].delta.content or "" for c in plain)  # the common loop: never an IndexError
    assert text and plain[-1].usage is None


def test_stream_without_token_events_still_sends_the_answer(tmp_path):
    """A final step that is a recursive round streams no tokens at depth 0; the answer comes in one piece."""
    workers = [sim_worker("alpha"), {"name": "self", "provider": "conductor"}]
    pool = write_pool(tmp_path, "rec", workers, conductor={"backend": {"name": "p", "provider": "simulated",
                      "options": {"world": "serve-test-plan"}}, "max_steps": 2})
    cfg = config(tmp_path, {"rec": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 4, "max_depth": 0}}})
    with serve(cfg) as url:
        chunks = list(client(url).chat.completions.create(model="rec", messages=[{"role": "user", "content": "q"}], stream=True))
        run = trace(url, chunks[0].model_extra["conductor"]["trace_id"])
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert run["steps"][1]["worker_name"] == "self" and run["limits_hit"] == ["max_depth"]
    assert text == run["final_answer"] == clean_answer(run["steps"][0]["output"]) != ""


def test_responses_api_plain_and_streaming(cfg):
    with serve(cfg) as url:
        c = client(url)
        resp = c.responses.create(model="conductor", input="What is the capital of France?", instructions="Be brief.")
        run = trace(url, resp.model_extra["conductor"]["trace_id"])
        events = list(c.responses.create(model="conductor", input=[{"role": "user", "content": "Stream it."}], stream=True))
        streamed_run = trace(url, events[-1].response.model_extra["conductor"]["trace_id"])
    assert resp.status == "completed" and resp.output_text == run["final_answer"] != ""
    assert run["question"].startswith("Instructions:\nBe brief.")
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens > 0
    assert resp.usage.model_extra["per_worker"].keys() == {"alpha", "beta"}
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) >= 3 and "".join(deltas) == streamed_run["final_answer"] == events[-1].response.output_text
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))


# ----------------------------------------------------------------------------------- keys and limits


def test_auth_missing_wrong_and_env_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OC_TEST_KEY", OTHER_KEY)
    pool = sim_pool(tmp_path)
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                 keys=[{"name": "alpha", "sha256": hash_key(KEY)}, {"name": "beta", "env": "OC_TEST_KEY"}])
    with serve(cfg) as url:
        with pytest.raises(openai.AuthenticationError) as wrong:
            client(url, "sk-wrong").chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}])
        missing = httpx.post(f"{url}/v1/chat/completions", json={"model": "moa", "messages": [{"role": "user", "content": "hi"}]})
        basic = httpx.get(f"{url}/v1/models", headers={"Authorization": "Basic abc"})
        traces = httpx.get(f"{url}/v1/traces")
        ok = client(url, OTHER_KEY).chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}])
        run = trace(url, ok.model_extra["conductor"]["trace_id"], key=OTHER_KEY)
    assert wrong.value.status_code == 401 and wrong.value.body["code"] == "invalid_api_key"
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert set(missing.json()["error"]) == {"message", "type", "param", "code"} and "Bearer" in missing.json()["error"]["message"]
    assert basic.status_code == 401 and traces.status_code == 401
    assert run["metadata"]["api_key"] == "beta"


def test_each_key_reads_only_its_own_traces_unless_it_reads_all(tmp_path):
    pool = sim_pool(tmp_path)
    operator = "sk-test-operator"
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                 keys=[{"name": "alpha", "sha256": hash_key(KEY)}, {"name": "beta", "sha256": hash_key(OTHER_KEY)},
                       {"name": "ops", "sha256": hash_key(operator), "traces": "all"}])
    ask = [{"role": "user", "content": "hi"}]
    with serve(cfg) as url:
        mine = client(url, KEY).chat.completions.create(model="moa", messages=ask).model_extra["conductor"]["trace_id"]
        theirs = client(url, OTHER_KEY).chat.completions.create(model="moa", messages=ask).model_extra["conductor"]["trace_id"]
        listed = {k: [r["id"] for r in httpx.get(f"{url}/v1/traces", headers={"Authorization": f"Bearer {v}"}).json()["data"]]
                  for k, v in (("alpha", KEY), ("beta", OTHER_KEY), ("ops", operator))}
        other = httpx.get(f"{url}/v1/traces/{theirs}", headers={"Authorization": f"Bearer {KEY}"})
        own = trace(url, mine, key=KEY)
        as_operator = trace(url, theirs, key=operator)
    assert listed == {"alpha": [mine], "beta": [theirs], "ops": [theirs, mine]}
    assert other.status_code == 404 and other.json()["error"]["code"] == "trace_not_found"  # existence is not revealed
    assert own["id"] == mine and as_operator["metadata"]["api_key"] == "beta"


def test_rate_limit_answers_429_with_retry_after(tmp_path):
    pool = sim_pool(tmp_path)
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                 keys=[{"name": "alpha", "sha256": hash_key(KEY), "requests_per_minute": 6, "burst": 2}])
    body = {"model": "moa", "messages": [{"role": "user", "content": "hi"}]}
    with serve(cfg) as url:
        h = {"Authorization": f"Bearer {KEY}"}
        codes = [httpx.post(f"{url}/v1/chat/completions", json=body, headers=h).status_code for _ in range(2)]
        limited = httpx.post(f"{url}/v1/chat/completions", json=body, headers=h)
        with pytest.raises(openai.RateLimitError) as sdk:
            client(url).chat.completions.create(**body)
    assert codes == [200, 200]
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit_error"
    assert 1 <= int(limited.headers["retry-after"]) <= 10  # 6/min refills one request in 10 s
    assert sdk.value.status_code == 429


def test_concurrency_limit_per_key(tmp_path):
    pool = sim_pool(tmp_path, latency=0.6)
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}},
                 keys=[{"name": "alpha", "sha256": hash_key(KEY), "max_concurrent": 1, "requests_per_minute": 600},
                       {"name": "beta", "sha256": hash_key(OTHER_KEY), "max_concurrent": 1, "requests_per_minute": 600}])
    body = {"model": "moa", "messages": [{"role": "user", "content": "slow"}]}

    async def go(url):
        async with httpx.AsyncClient(base_url=url, timeout=30) as h:
            first = asyncio.create_task(h.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}))
            await asyncio.sleep(0.25)
            second = await h.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
            other = await h.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {OTHER_KEY}"})
            return await first, second, other

    with serve(cfg) as url:
        first, second, other = asyncio.run(go(url))
        after = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert first.status_code == 200 and other.status_code == 200  # limits are per key
    assert second.status_code == 429 and second.headers["retry-after"] == "1" and "running" in second.json()["error"]["message"]
    assert after.status_code == 200  # the slot is released when the run ends


def test_budget_lowering_and_raising(cfg):
    with serve(cfg) as url:
        c = client(url)
        low = c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}], extra_body={"conductor": {"max_calls": 1}})
        run = trace(url, low.model_extra["conductor"]["trace_id"])
        with pytest.raises(openai.BadRequestError) as high:
            c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}], extra_body={"conductor": {"max_calls": 50}})
        with pytest.raises(openai.BadRequestError) as typo:
            c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}], extra_body={"conductor": {"max_steps": 1}})
        # 120 tokens run the proposers but leave none for the aggregator: no answer, so a 400 naming the limit
        # (issue 70: this was an empty 200), with the trace of what ran.
        with pytest.raises(openai.BadRequestError) as tokens:
            c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}], extra_body={"conductor": {"max_tokens": 120}})
        tokens_run = trace(url, tokens.value.body["trace_id"])
    assert run["totals"]["calls"] == 1 and run["limits_hit"] == ["max_calls"]
    assert [s["status"] for s in run["steps"]].count("skipped") == 2
    assert low.model_extra["conductor"]["limits_hit"] == ["max_calls"]
    assert high.value.body["code"] == "limit_above_ceiling" and high.value.body["param"] == "conductor.max_calls"
    assert "6" in high.value.body["message"]  # names the ceiling
    assert typo.value.body["param"] == "conductor.max_steps"
    used = tokens_run["totals"]["worker_usage"]["input_tokens"] + tokens_run["totals"]["worker_usage"]["output_tokens"]
    assert used <= 120 and "max_tokens" in tokens_run["limits_hit"]
    assert tokens.value.body["code"] == "limit_too_low" and tokens.value.body["limit"] == {"name": "max_tokens", "value": 120, "source": "request"}


# ----------------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize("body, param", [
    (b"{not json", None),
    (b"[1, 2]", None),
    (json.dumps({"model": "moa"}).encode(), "messages"),
    (json.dumps({"model": "moa", "messages": []}).encode(), "messages"),
    (json.dumps({"model": "moa", "messages": [{"role": "user", "content": "x"}], "n": 2}).encode(), "n"),
    (json.dumps({"model": "moa", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom", "custom": {"name": "x"}}]}).encode(), "tools[0].type"),
    (json.dumps({"model": "moa", "messages": [{"role": "wizard", "content": "x"}]}).encode(), "messages[0].role"),
    (json.dumps({"model": "moa", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}).encode(), "messages"),
    (json.dumps({"model": "moa", "messages": [{"role": "user", "content": "x"}], "temperature": 9}).encode(), "temperature"),
])
def test_malformed_requests_get_openai_style_400(cfg, body, param):
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/chat/completions", content=body,
                       headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if param:
        assert error["param"] is not None and error["param"].startswith(param)


def test_fastapi_validation_errors_are_400_not_422(cfg):
    with serve(cfg) as url:
        r = httpx.get(f"{url}/v1/traces", params={"limit": "lots"}, headers={"Authorization": f"Bearer {KEY}"})
        unknown = httpx.get(f"{url}/v1/traces/nope", headers={"Authorization": f"Bearer {KEY}"})
        route = httpx.get(f"{url}/v1/nothing-here")
    assert r.status_code == 400 and r.json()["error"]["param"] == "query.limit"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "trace_not_found"
    assert route.status_code == 404 and "error" in route.json()


def test_oversized_bodies_are_413(tmp_path):
    pool = sim_pool(tmp_path)
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa"}}, server={"max_body_bytes": 2000})
    big = json.dumps({"model": "moa", "messages": [{"role": "user", "content": "x" * 5000}]}).encode()

    def chunked():  # no Content-Length: the limit is enforced while reading
        for i in range(0, len(big), 512):
            yield big[i:i + 512]

    with serve(cfg) as url:
        h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        declared = httpx.post(f"{url}/v1/chat/completions", content=big, headers=h)
        streamed = httpx.post(f"{url}/v1/chat/completions", content=chunked(), headers=h)
        small = httpx.post(f"{url}/v1/chat/completions", json={"model": "moa", "messages": [{"role": "user", "content": "x"}]}, headers=h)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "body_too_large"
    assert streamed.status_code == 413 and "transfer-encoding" not in {k.lower() for k in streamed.request.headers if k.lower() == "content-length"}
    assert small.status_code == 200


# ---------------------------------------------------------------------------------- worker outages


def outage_cfg(tmp_path, final_fails: bool, all_fail: bool):
    def worker(name: str, fails: bool) -> dict:
        return sim_worker(name, 0.05, fail_rate=1.0, failure="error") if fails else sim_worker(name, 0.05)

    workers = [worker("alpha", all_fail), worker("beta", final_fails or all_fail)]
    pool = write_pool(tmp_path, "flaky", workers, conductor={"backend": {"name": "p", "provider": "simulated",
                      "options": {"world": "serve-test-plan"}}, "max_steps": 3})
    return config(tmp_path, {"c": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 4, "max_depth": 0}}})


def test_outage_without_answer_is_502(tmp_path):
    with serve(outage_cfg(tmp_path, final_fails=True, all_fail=True)) as url:
        start = time.monotonic()
        with pytest.raises(openai.InternalServerError) as exc:
            client(url).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}])
        run = trace(url, exc.value.body["trace_id"])
    assert exc.value.status_code == 502 and exc.value.body["type"] == "upstream_error"
    assert exc.value.body["run_status"] == "error" and "no answer" in exc.value.body["message"]
    assert all(s["status"] == "error" for s in run["steps"]) and time.monotonic() - start < 10


def test_outage_mid_stream_ends_with_a_clear_status(tmp_path):
    # The draft succeeds and is streamed as a step event; then the finalising worker is down.
    with serve(outage_cfg(tmp_path, final_fails=True, all_fail=False)) as url:
        chunks = list(client(url).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}], stream=True))
    ext = chunks[-1].model_extra["conductor"]
    steps = [c.model_extra["conductor"] for c in chunks if c.model_extra.get("conductor", {}).get("event") == "step_finished"]
    assert [s["status"] for s in steps] == ["ok", "error"] and "simulated error" in steps[1]["error"]
    assert ext["event"] == "run_finished" and ext["status"] == "error"
    # the earlier answer stands, and the client is told so
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ext["final_answer"] == clean_answer(steps[0]["output"])


def test_outage_mid_stream_without_answer_raises_in_the_client(tmp_path):
    with serve(outage_cfg(tmp_path, final_fails=True, all_fail=True)) as url:
        seen = []
        with pytest.raises(openai.APIError) as exc:
            for chunk in client(url).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}], stream=True):
                seen.append(chunk)
        with httpx.stream("POST", f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                          json={"model": "c", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert seen and seen[0].model_extra["conductor"]["event"] == "run_started"
    assert "no answer" in exc.value.message and exc.value.body["run_status"] == "error"
    assert lines[-1] == "data: [DONE]" and '"error"' in lines[-2]


def test_client_disconnect_cancels_the_run(tmp_path):
    workers = [sim_worker("alpha", 0.5), sim_worker("beta", 0.5)]
    pool = write_pool(tmp_path, "slow", workers)
    cfg = config(tmp_path, {"slow": {"version": "v1", "pool": pool, "policy": "self-reflection",
                                     "policy_options": {"rounds": 4}, "limits": {"max_calls": 10, "max_depth": 0}}})
    with serve(cfg) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=30,
                          json={"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
            first = next(line for line in r.iter_lines() if line.startswith("data: "))
        trace_id = json.loads(first[6:])["conductor"]["trace_id"]
        deadline = time.monotonic() + 5
        while (run := trace(url, trace_id))["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.2)  # long enough for two more steps, had the run gone on
        later = trace(url, trace_id)
    assert run["status"] == "error" and "cancelled" in run["error"]
    assert later["totals"]["calls"] == run["totals"]["calls"]
    assert sum(s["status"] == "ok" for s in later["steps"]) <= 1  # 5 steps of 0.5 s each were planned


# ---------------------------------------------------------------------------------- health, metrics


def test_health_and_metrics(cfg):
    with serve(cfg) as url:
        client(url).chat.completions.create(model="moa", messages=[{"role": "user", "content": "hi"}])
        httpx.get(f"{url}/v1/models")  # 401
        health = httpx.get(f"{url}/health").json()
        text = httpx.get(f"{url}/metrics").text
    assert health["status"] == "ok" and health["presets"]["moa"] == "moa@v1"
    assert 'openconductor_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1.0' in text
    assert 'openconductor_http_requests_total{method="GET",route="/v1/models",status="401"} 1.0' in text
    assert 'openconductor_errors_total{type="invalid_api_key"} 1.0' in text
    assert 'openconductor_runs_total{endpoint="chat",preset="moa",status="ok"} 1.0' in text
    assert 'openconductor_http_request_duration_seconds_bucket{le="+Inf",route="/v1/chat/completions"} 1.0' in text
    worker_line = next(line for line in text.splitlines() if line.startswith('openconductor_tokens_total{kind="worker",preset="moa"}'))
    assert float(worker_line.split()[-1]) > 0
