"""The whole OpenAI request surface and the hardening fixes, through real uvicorn and the openai client."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import typing

import httpx
import openai
import pytest

from _server_kit import KEY, OTHER_KEY, config, http_pool, running, serve, sim_pool
from openconductor.records import Run
from openconductor.server import create_app, hash_key
from openconductor.server.chat_request import ChatCompletionRequest
from openconductor.server.responses_request import ResponsesRequest
from openconductor.server.simulated_upstream import create_upstream
from openconductor.traces import Owner, TraceStore, row

pytestmark = pytest.mark.timeout(60)


def client(url: str, key: str = KEY, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=retries, timeout=30)


def get(url: str, path: str, key: str = KEY) -> httpx.Response:
    return httpx.get(url + path, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    return config(tmp_path, {"conductor": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}}},
                  server={"traces": str(tmp_path / "traces.sqlite3")})


# ------------------------------------------------------------------------------------ the schema


def _sdk_fields(params) -> set[str]:
    return set(typing.get_type_hints(params)) | {"stream"}


def test_every_field_of_both_sdk_request_schemas_is_accepted():
    """Fails when the SDK grows a request field this server does not know (then decide: honour, hint or 400)."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase
    from openai.types.responses.response_create_params import ResponseCreateParamsBase

    assert _sdk_fields(CompletionCreateParamsBase) - set(ChatCompletionRequest.model_fields) == set()
    assert _sdk_fields(ResponseCreateParamsBase) - set(ResponsesRequest.model_fields) == set()


HARMLESS = dict(frequency_penalty=0, presence_penalty=0, stop=["\n\nUser:"], logprobs=False, top_logprobs=0, n=1,
                parallel_tool_calls=False, response_format={"type": "text"}, tool_choice="none", store=False, service_tier="auto",
                prompt_cache_key="k", reasoning_effort="low", verbosity="low", modalities=["text"], user="u1", seed=3,
                temperature=0.7, top_p=0.9, logit_bias={}, metadata={"app": "test"}, safety_identifier="s1",
                stream_options=None, prediction={"type": "content", "content": "x"}, prompt_cache_retention="24h")


def test_harmless_defaults_that_frameworks_send_are_accepted(cfg):
    with serve(cfg) as url:
        c = client(url)
        chat = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "hi"}], **HARMLESS)
        resp = c.responses.create(model="conductor", input="hi", parallel_tool_calls=False, tool_choice="none", store=False,
                                  include=["reasoning.encrypted_content"], reasoning={"effort": "low"}, truncation="disabled",
                                  text={"format": {"type": "text"}, "verbosity": "low"}, metadata={"app": "test"}, top_logprobs=0,
                                  background=False, service_tier="auto", prompt_cache_key="k", temperature=0.5, top_p=0.9)
    assert chat.choices[0].message.content and chat.choices[0].finish_reason == "stop"
    assert resp.status == "completed" and resp.output_text and resp.metadata == {"app": "test"}


@pytest.mark.parametrize("api, extra, param", [
    ("chat", {"n": 2}, "n"),
    ("chat", {"logprobs": True}, "logprobs"),
    ("chat", {"top_logprobs": 3}, "top_logprobs"),
    ("chat", {"logit_bias": {"50256": -100}}, "logit_bias"),
    ("chat", {"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
    ("chat", {"modalities": ["text", "audio"]}, "modalities"),
    ("chat", {"web_search_options": {}}, "web_search_options"),
    ("chat", {"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("chat", {"tools": [{"type": "custom", "custom": {"name": "grep"}}]}, "tools[0].type"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "messages[0].content[0].type"),
    ("chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
     "response_format.json_schema.schema"),
    ("chat", {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ("chat", {"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ("chat", {"frobnicate": 1}, "frobnicate"),
    ("responses", {"previous_response_id": "resp_1"}, "previous_response_id"),
    ("responses", {"conversation": "conv_1"}, "conversation"),
    ("responses", {"background": True}, "background"),
    ("responses", {"prompt": {"id": "pmpt_1"}}, "prompt"),
    ("responses", {"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ("responses", {"input": [{"type": "input_image_call", "x": 1}]}, "input[0].type"),
    ("responses", {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
     "input[0].content[0].type"),
])
def test_what_cannot_be_honoured_is_a_400_naming_the_parameter(cfg, api, extra, param):
    body = ({"model": "conductor", "messages": [{"role": "user", "content": "q"}]} if api == "chat" else {"model": "conductor", "input": "q"})
    body.update(extra)
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/{'chat/completions' if api == 'chat' else 'responses'}", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()


def test_max_tokens_caps_the_answer_and_every_call_and_stop_cuts_it(tmp_path):
    pool = sim_pool(tmp_path)
    cfg = config(tmp_path, {"moa": {"version": "v1", "pool": pool, "policy": "moa", "limits": {"max_calls": 6, "max_depth": 0}}})
    with serve(cfg) as url:
        c = client(url)
        capped = c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "q"}], max_tokens=2)
        run = get(url, f"/v1/traces/{capped.model_extra['conductor']['trace_id']}").json()
        also = c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "q"}], max_completion_tokens=2)
        resp = c.responses.create(model="moa", input="q", max_output_tokens=2)
        stopped = c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "q"}], stop=" answer")
    assert len(capped.choices[0].message.content.split()) == 2 and capped.choices[0].finish_reason == "length"
    assert all(s["usage"]["output_tokens"] <= 2 for s in run["steps"]) and len(run["steps"]) == 3  # every call was capped
    assert len(also.choices[0].message.content.split()) == 2
    assert resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"
    assert stopped.choices[0].message.content in ("alpha", "beta")  # "<worker> answer <digest>" cut at the stop sequence


def test_context_overflow_is_400_context_length_exceeded_and_not_retried(tmp_path):
    upstream = create_upstream(latency_s=0.0, context_words=40)
    with running(upstream) as up:
        cfg = config(tmp_path, {"single": {"version": "v1", "pool": http_pool(tmp_path, up, "tiny"), "policy": "single"}})
        with serve(cfg) as url:
            with pytest.raises(openai.BadRequestError) as caught:
                client(url, retries=2).chat.completions.create(model="single", messages=[{"role": "user", "content": "word " * 200}])
            calls = httpx.get(f"{up}/control").json()["calls"]
            traces = get(url, "/v1/traces").json()["data"]
    error = caught.value.body
    assert caught.value.status_code == 400 and error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert calls == 1 and len(traces) == 1  # one run, one upstream call: nothing was retried


# ------------------------------------------------------------------------------------- hardening


def test_caller_metadata_cannot_overwrite_server_fields(tmp_path):
    pool = sim_pool(tmp_path)
    keys = [{"name": "alpha", "sha256": hash_key(KEY)}, {"name": "beta", "sha256": hash_key(OTHER_KEY)}]
    cfg = config(tmp_path, {"conductor": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}}}, keys)
    forged = {"api_key": "beta", "preset": "other", "version": "0", "model": "x", "user": "mallory"}
    with serve(cfg) as url:
        resp = client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], metadata=forged)
        trace_id = resp.model_extra["conductor"]["trace_id"]
        mine = get(url, f"/v1/traces/{trace_id}").json()
        theirs = get(url, "/v1/traces", OTHER_KEY).json()["data"]
        hidden = get(url, f"/v1/traces/{trace_id}", OTHER_KEY)
    assert mine["metadata"]["api_key"] == "alpha" and mine["metadata"]["preset"] == "conductor" and mine["metadata"]["version"] == "v1"
    assert mine["metadata"]["client"] == forged and "user" not in mine["metadata"]
    assert theirs == [] and hidden.status_code == 404


def test_lone_surrogates_do_not_break_trace_saving_or_reading(cfg):
    body = b'{"model": "conductor", "messages": [{"role": "user", "content": "broken \\ud800 text \\ud83d\\ude00"}]}'
    with serve(cfg) as url:
        r = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        trace_id = r.json()["conductor"]["trace_id"]
        live = get(url, f"/v1/traces/{trace_id}")
        missing = get(url, "/v1/traces/nope%ED%A0%80")
    store = TraceStore(cfg.server.traces)
    saved = store.get(trace_id)
    assert live.status_code == 200 and live.headers["content-type"] == "application/json"
    assert saved.question == "broken \ufffd text \U0001f600" == live.json()["question"]  # the valid pair is kept
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "trace_not_found"


def test_runs_left_running_by_a_dead_process_are_marked_interrupted_at_start_up(cfg, tmp_path):
    store = TraceStore(cfg.server.traces)
    # A real process that dies: the run it owned stays `running` in the store.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = Owner.of_process(proc.pid)
    proc.kill()
    proc.wait()
    orphan = Run(question="left behind", policy="conductor", metadata={"api_key": "alpha"})
    elsewhere = Run(question="on another host", policy="conductor", metadata={"api_key": "alpha"})
    alive = Run(question="still going", policy="conductor", metadata={"api_key": "alpha"})
    store.write([row(orphan, dead.id), row(elsewhere, "other-host/boot/123/456"), row(alive, Owner.current().id)])
    with serve(cfg) as url:
        got = {r.id: get(url, f"/v1/traces/{r.id}").json() for r in (orphan, elsewhere, alive)}
    assert got[orphan.id]["status"] == "error" and got[orphan.id]["error"].startswith("interrupted:")
    assert got[elsewhere.id]["status"] == "error"  # never beat a heartbeat: its owner is gone
    assert got[alive.id]["status"] == "running"  # this process is alive


def test_trace_database_is_owner_only(cfg):
    with serve(cfg) as url:
        client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}])
        files = [f for f in os.listdir(os.path.dirname(cfg.server.traces)) if f.startswith("traces.sqlite3")]
        modes = {f: stat.S_IMODE(os.stat(os.path.join(os.path.dirname(cfg.server.traces), f)).st_mode) for f in files}
    assert "traces.sqlite3-wal" in modes and set(modes.values()) == {0o600}, modes


def test_metrics_can_require_an_operator_key(tmp_path):
    pool = sim_pool(tmp_path)
    keys = [{"name": "alpha", "sha256": hash_key(KEY)}, {"name": "ops", "sha256": hash_key(OTHER_KEY), "traces": "all"}]
    cfg = config(tmp_path, {"c": {"version": "v1", "pool": pool, "policy": "moa"}}, keys, server={"metrics": "operator"})
    with serve(cfg) as url:
        anonymous = httpx.get(url + "/metrics")
        user = get(url, "/metrics", KEY)
        operator = get(url, "/metrics", OTHER_KEY)
    assert anonymous.status_code == 401 and user.status_code == 403 and operator.status_code == 200
    assert "openconductor_http_requests_total" in operator.text


def test_unexpected_errors_are_json(cfg, monkeypatch):
    app = create_app(cfg)

    async def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(app.state.runtime, "get_run", broken)
    with running(app) as url:
        r = get(url, "/v1/traces/whatever")
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"

