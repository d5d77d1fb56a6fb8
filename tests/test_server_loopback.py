"""The server in front of workers reached over real loopback HTTP (provider "openai" → a simulated
OpenAI-compatible upstream): true token streaming end to end, and an upstream outage mid-stream."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from _server_kit import KEY, config, running, serve, write_pool
from openconductor.server.simulated_upstream import create_upstream

pytestmark = pytest.mark.timeout(60)


def http_worker(name: str, upstream: str) -> dict:
    return {"name": name, "provider": "openai", "model": f"up-{name}", "base_url": upstream + "/v1", "max_retries": 0,
            "timeout_s": 10, "max_tokens": 64}


def pool_cfg(tmp_path, upstream: str):
    pool = write_pool(tmp_path, "http", [http_worker("alpha", upstream), http_worker("beta", upstream)],
                      conductor={"backend": {"name": "planner", "provider": "simulated", "options": {"world": "serve-test-plan"}}, "max_steps": 3})
    return config(tmp_path, {"c": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 4, "max_depth": 0}}})


def test_tokens_stream_through_as_the_upstream_generates_them(tmp_path):
    with running(create_upstream(latency_s=0.05, token_delay_s=0.06, words=10)) as upstream, serve(pool_cfg(tmp_path, upstream)) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        arrivals = []
        for chunk in c.chat.completions.create(model="c", messages=[{"role": "user", "content": "Count to ten."}], stream=True):
            arrivals.append((time.monotonic(), chunk))
        final = arrivals[-1][1].model_extra["conductor"]
        before = httpx.get(upstream + "/control").json()
        plain = c.chat.completions.create(model="c", messages=[{"role": "user", "content": "Count to ten."}])
        after = httpx.get(upstream + "/control").json()
    content = [(t, ch.choices[0].delta.content) for t, ch in arrivals if ch.choices and ch.choices[0].delta.content]
    text = "".join(piece for _, piece in content)
    assert text == final["final_answer"] and text.startswith("up-beta ") and len(text.split()) == 10
    assert len(content) == 10
    # Ten tokens 60 ms apart upstream: they reach the client spread out, not in one burst at the end.
    assert content[-1][0] - content[0][0] > 0.35
    step0 = next(t for t, ch in arrivals if ch.model_extra.get("conductor", {}).get("event") == "step_finished")
    assert step0 < content[0][0]
    assert before["streamed"] == 2  # a streaming request streams its worker calls ...
    assert after["calls"] - before["calls"] == 2 and after["streamed"] == before["streamed"]  # ... a plain one does not
    assert plain.choices[0].message.content.startswith("up-beta ") and plain.usage.model_extra["per_worker"].keys() == {"alpha", "beta"}


def test_upstream_outage_mid_stream(tmp_path):
    with running(create_upstream(latency_s=0.3, words=6)) as upstream, serve(pool_cfg(tmp_path, upstream)) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        chunks = []
        start = time.monotonic()
        for chunk in c.chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}], stream=True):
            chunks.append(chunk)
            ext = chunk.model_extra.get("conductor", {})
            if ext.get("event") == "step_finished" and ext["index"] == 0:
                httpx.post(upstream + "/control", json={"fail_status": 503})  # the upstream goes down now
        elapsed = time.monotonic() - start
        with pytest.raises(openai.InternalServerError) as down:
            c.chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}])
    ext = chunks[-1].model_extra["conductor"]
    finished = [ch.model_extra["conductor"] for ch in chunks if ch.model_extra.get("conductor", {}).get("event") == "step_finished"]
    assert [f["status"] for f in finished] == ["ok", "error"] and "HTTP 503" in finished[1]["error"]
    assert ext["status"] == "error" and ext["final_answer"].startswith("up-alpha ")
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == ext["final_answer"]
    assert elapsed < 10
    assert down.value.status_code == 502 and "HTTP 503" in down.value.body["message"]


def test_a_broken_final_stream_is_retried_and_announced(tmp_path):
    """The finalising worker's stream drops after 3 tokens; the retry streams the answer again."""
    with running(create_upstream(latency_s=0.05, words=8)) as upstream:
        pool_cfg(tmp_path, upstream)
        pool_file = tmp_path / "http.yaml"
        pool_file.write_text(pool_file.read_text().replace("max_retries: 0", "max_retries: 1"))
        cfg = config(tmp_path, {"c": {"version": "v1", "pool": "http.yaml", "policy": "conductor", "limits": {"max_calls": 4, "max_depth": 0}}})
        with serve(cfg) as url:
            httpx.post(upstream + "/control", json={"cut_streams": 1, "cut_model": "up-beta"})
            c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
            chunks = list(c.chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}], stream=True))
    retry = [ch.model_extra["conductor"] for ch in chunks if ch.model_extra.get("conductor", {}).get("event") == "step_retry"]
    final = chunks[-1].model_extra["conductor"]
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert final["status"] == "ok" and final["final_answer"].startswith("up-beta ")
    assert len(retry) == 1 and retry[0]["index"] == 1 and retry[0]["discard_streamed_content"] is True
    # What a standard client concatenated holds the void tokens too; the flag and the event say so.
    assert final["streamed_matches_final"] is False and text.endswith(final["final_answer"]) and text != final["final_answer"]
