"""What mainstream clients send and call, with the official openai client against a real server on loopback:
one test per defect of issue 32 (chat history from the SDK, endpoints, key headers, structured output after a
tool step, errors clients must not retry). Workers are simulated (no model); the python tool and its sandbox
are real."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from _server_kit import KEY, config, serve, sim_pool, sim_worker, write_pool
from openconductor.providers.simulated import register_responder

pytestmark = pytest.mark.timeout(60)


def client(url: str, key: str = KEY, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, timeout=30, **{"max_retries": 0, **kwargs})


def runs_recorded(url: str) -> list[dict]:
    return httpx.get(f"{url}/v1/traces", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]


@pytest.fixture
def cfg(tmp_path):
    return config(tmp_path, {"conductor": {"version": "v1", "pool": sim_pool(tmp_path), "policy": "conductor",
                                           "limits": {"max_calls": 6, "max_depth": 0}}})


# ------------------------------------------------------------------------------ chat history from the SDK


def test_a_reply_appended_with_model_dump_is_valid_history(cfg):
    with serve(cfg) as url:
        c = client(url)
        first = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
        replayed = first.choices[0].message.model_dump()
        assert {"refusal", "annotations", "audio", "function_call", "tool_calls"} <= set(replayed)  # the SDK's own fields
        history = [{"role": "user", "content": "What is 6 * 7?"}, replayed, {"role": "user", "content": "And 7 * 8?"}]
        second = c.chat.completions.create(model="conductor", messages=history)
        # Values, not only nulls: an earlier reply's citations, audio (its transcript reads as its text) and reasoning.
        rich = {"role": "assistant", "content": None, "refusal": None, "function_call": None, "tool_calls": None,
                "annotations": [{"type": "url_citation", "url_citation": {"url": "https://example.org", "title": "t",
                                                                         "start_index": 0, "end_index": 1}}],
                "audio": {"id": "audio_1", "data": "", "expires_at": 0, "transcript": "forty-two"},
                "reasoning_content": "6 * 7 = 42", "reasoning": "thinking", "thinking_blocks": [], "provider_specific_fields": None}
        third = c.chat.completions.with_raw_response.create(model="conductor", messages=[history[0], rich, history[2]])
        trace = httpx.get(f"{url}/v1/traces/{third.headers['x-conductor-trace-id']}", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert second.choices[0].message.content and third.parse().choices[0].message.content
    assert "Assistant: forty-two" in trace["question"] and "6 * 7 = 42" not in trace["question"]  # reasoning is not replayed


def test_unknown_fields_still_get_a_named_400(cfg):
    with serve(cfg) as url:
        with pytest.raises(openai.BadRequestError) as top:
            client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "hi"}], extra_body={"temprature": 1})
        with pytest.raises(openai.BadRequestError) as nested:
            client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "hi", "contnet": "x"}])
    assert top.value.body["param"] == "temprature" and "unknown parameter" in top.value.body["message"]
    assert nested.value.body["param"] == "messages[0].contnet"


# ------------------------------------------------------------------------------------------- endpoints


def test_models_retrieve_answers_200_for_a_served_model_and_an_openai_404_otherwise(cfg):
    with serve(cfg) as url:
        c = client(url)
        plain, pinned = c.models.retrieve("conductor"), c.models.retrieve("conductor@v1")
        with pytest.raises(openai.NotFoundError) as missing:
            c.models.retrieve("gpt-nope")
        with pytest.raises(openai.NotFoundError) as old:
            c.models.retrieve("conductor@v0")
    assert plain.id == "conductor" and plain.object == "model" and pinned.model_extra["conductor"]["pinned"] is True
    assert missing.value.body == {"message": "The model 'gpt-nope' does not exist; GET /v1/models lists the served models (conductor)",
                                  "type": "invalid_request_error", "param": "model", "code": "model_not_found"}
    assert old.value.body["code"] == "model_not_found"


def test_every_field_of_the_sdks_legacy_completions_request_is_accepted():
    """Fails when the SDK grows a field /v1/completions does not know (then decide: honour, or a 400 naming it)."""
    import typing

    from openai.types.completion_create_params import CompletionCreateParamsBase

    from openconductor.server.completions import CompletionRequest

    assert set(typing.get_type_hints(CompletionCreateParamsBase)) | {"stream"} <= set(CompletionRequest.model_fields)


def test_legacy_completions_are_served_plain_and_streaming(cfg):
    with serve(cfg) as url:
        c = client(url)
        plain = c.completions.create(model="conductor", prompt="Say hello.", max_tokens=64)
        chunks = list(c.completions.create(model="conductor", prompt=["Say hello."], stream=True, stream_options={"include_usage": True}))
        with pytest.raises(openai.BadRequestError) as tokens:
            c.completions.create(model="conductor", prompt=[1, 2, 3])
        with pytest.raises(openai.BadRequestError) as echo:
            c.completions.create(model="conductor", prompt="x", echo=True)
    assert plain.object == "text_completion" and plain.id.startswith("cmpl-") and plain.choices[0].finish_reason == "stop"
    assert plain.choices[0].text.startswith("beta answer") and plain.usage.total_tokens > 0
    streamed = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert streamed.startswith("beta answer") and all(ch.object == "text_completion" for ch in chunks)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop" and chunks[-1].usage.total_tokens > 0
    assert tokens.value.body["param"] == "prompt" and echo.value.body["param"] == "echo"


def test_the_key_is_also_read_from_api_key_and_x_api_key(cfg):
    with serve(cfg) as url:
        azure_style = client(url, "unused").chat.completions.create(
            model="conductor", messages=[{"role": "user", "content": "hi"}], extra_headers={"Authorization": openai.Omit(), "api-key": KEY})
        statuses = [httpx.get(f"{url}/v1/models", headers={header: key}).status_code
                    for header, key in (("api-key", KEY), ("x-api-key", KEY), ("x-api-key", "sk-wrong"), ("api-key", ""))]
        # Authorization, when sent, is the key: a wrong bearer is not rescued by another header.
        both = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer sk-wrong", "x-api-key": KEY}).status_code
        missing = httpx.get(f"{url}/v1/models")
    assert azure_style.choices[0].message.content
    assert statuses == [200, 200, 401, 401] and both == 401
    assert missing.status_code == 401 and "x-api-key" in missing.json()["error"]["message"]


# ------------------------------------------------------------- structured output after a plan's tool step


@register_responder("compat-tool-plan")
def _tool_plan(spec, messages, rng) -> str:
    """A conductor backend (simulated) that plans as the trained local conductor does for arithmetic: code, run."""
    return ('Reasoning: computable.\nmodel_id = [0, 1]\nsubtasks = ["Write a program that prints the answer.", "Run it."]\n'
            'access_list = [[], ["all"]]')


@register_responder("compat-coder")
def _coder(spec, messages, rng) -> str:
    return "```python\nprint('Final answer:', 6 * 7)\n```"


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}, "required": ["city"]}}}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": False}


@pytest.fixture
def tool_cfg(tmp_path):
    workers = [{"name": "coder", "provider": "simulated", "options": {"world": "compat-coder"}},
               {"name": "python", "provider": "python", "max_retries": 0, "options": {"wall_s": 5, "cpu_s": 2}}]
    pool = write_pool(tmp_path, "tools", workers, conductor={"backend": {"name": "p", "provider": "simulated",
                                                                          "options": {"world": "compat-tool-plan"}}})
    return config(tmp_path, {"c": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}}})


def test_a_format_or_tools_after_a_final_tool_step_is_answered_by_a_model(tool_cfg):
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    with serve(tool_cfg) as url:
        c = client(url)
        schema = c.chat.completions.with_raw_response.create(model="c", messages=messages, response_format={
            "type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}})
        obj = c.chat.completions.create(model="c", messages=messages, response_format={"type": "json_object"})
        tools = c.chat.completions.create(model="c", messages=messages, tools=[WEATHER])
        stream = list(c.chat.completions.create(model="c", messages=messages, response_format={"type": "json_object"}, stream=True))
        plain = c.chat.completions.create(model="c", messages=messages)
        trace = httpx.get(f"{url}/v1/traces/{schema.headers['x-conductor-trace-id']}", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert [s["worker_name"] for s in trace["steps"]] == ["coder", "python", "coder"] and trace["steps"][2]["appended"]
    assert "Final answer: 42" in trace["steps"][1]["output"]
    assert set(json.loads(schema.parse().choices[0].message.content)) == {"answer"}
    assert isinstance(json.loads(obj.choices[0].message.content), dict)
    assert tools.choices[0].finish_reason == "tool_calls" and tools.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert isinstance(json.loads("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)), dict)
    events = [ch.model_extra["conductor"] for ch in stream if (ch.model_extra or {}).get("conductor", {}).get("event") == "step_finished"]
    assert [e["worker"] for e in events] == ["coder", "python", "coder"]
    # Without a format the program's printed answer stands: no step is added.
    assert plain.choices[0].message.content == "Final answer: 42" and len(plain.model_extra["conductor"]["workflow"]) == 2


# ---------------------------------------------------------------------- errors clients must not retry


def test_an_answer_that_cannot_take_the_format_is_a_422_the_sdk_does_not_retry(cfg):
    impossible = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1000}}, "required": ["n"]}
    with serve(cfg) as url:
        start = time.monotonic()
        with pytest.raises(openai.UnprocessableEntityError) as caught:  # the SDK's default retries are left on
            client(url, max_retries=2).chat.completions.create(
                model="conductor", messages=[{"role": "user", "content": "q"}],
                response_format={"type": "json_schema", "json_schema": {"name": "big", "schema": impossible}})
        runs = runs_recorded(url)
    assert caught.value.status_code == 422 and caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["code"] == "invalid_answer_format" and "1000" in caught.value.body["message"]
    assert len(runs) == 1 and time.monotonic() - start < 10  # one workflow, not three


def test_a_run_without_an_answer_is_a_502_the_sdk_does_not_retry(tmp_path):
    pool = write_pool(tmp_path, "down", [sim_worker("alpha", fail_rate=1.0), sim_worker("beta", fail_rate=1.0)],
                      conductor={"backend": {"name": "p", "provider": "simulated", "options": {"world": "serve-test-plan"}}})
    cfg = config(tmp_path, {"c": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 4, "max_depth": 0}}})
    with serve(cfg) as url:
        with pytest.raises(openai.InternalServerError) as caught:
            client(url, max_retries=2).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}])
        runs = runs_recorded(url)
    assert caught.value.status_code == 502 and caught.value.response.headers["x-should-retry"] == "false"
    assert len(runs) == 1
