"""The server on the REAL local pool (in-process llama.cpp small models), through the openai client."""

from __future__ import annotations

import httpx
import openai
import pytest

from _server_kit import KEY, config, serve
from openconductor.pool import load_default_pool

pytestmark = [pytest.mark.slow, pytest.mark.realmodel, pytest.mark.timeout(900)]


def test_real_local_pool_through_the_openai_client(tmp_path):
    cfg = config(tmp_path, {"conductor": {"version": "local-test", "pool": "default", "policy": "conductor", "max_steps": 2,
                                          "limits": {"max_calls": 4, "max_depth": 0}}})
    names = {w.name for w in load_default_pool().workers}
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=800)
        resp = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 2 + 3? Answer with a number."}],
                                         extra_body={"conductor": {"max_calls": 2}})
        run = httpx.get(f"{url}/v1/traces/{resp.model_extra['conductor']['trace_id']}", headers={"Authorization": f"Bearer {KEY}"}).json()
        # Streaming on the real models: tokens come from llama.cpp's thread and must still add up.
        chunks = list(c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "Name a colour."}],
                                                stream=True, extra_body={"conductor": {"max_calls": 2}}))
    assert run["pool"] == "local-tiny" and run["status"] in ("ok", "limit")
    assert run["totals"]["calls"] <= 2 and all(s["worker_name"] in names for s in run["steps"])
    # The real LM conductor planned it (its tokens are counted) and a real model wrote the answer.
    assert resp.usage.model_extra["conductor_tokens"] > 0 and resp.usage.model_extra["worker_tokens"] > 0
    assert resp.choices[0].message.content == run["final_answer"] and run["final_answer"].strip()
    assert set(resp.usage.model_extra["per_worker"]) <= names
    final = chunks[-1].model_extra["conductor"]
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert final["event"] == "run_finished" and streamed == final["final_answer"]
    assert sum(1 for ch in chunks if ch.choices and ch.choices[0].delta.content) >= 2 or final["status"] != "ok"
