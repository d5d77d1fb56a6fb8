"""Function calling and structured output: multi-turn tool loops with the official openai client (both
APIs, plain and streaming) on simulated workers, natively through an OpenAI-compatible upstream over
loopback HTTP, and the prompted/constrained path the small local models use."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from _server_kit import KEY, config, http_pool, running, serve, sim_pool
from openconductor.answer_format import AnswerFormat, AnswerFormatError, FunctionTool, JSONFormat, prepare, tool_reply_schema
from openconductor.records import Completion
from openconductor.server.simulated_upstream import create_upstream

pytestmark = pytest.mark.timeout(60)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CITY_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": False}


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=30)


def trace(url: str, run_id: str) -> dict:
    return httpx.get(f"{url}/v1/traces/{run_id}", headers={"Authorization": f"Bearer {KEY}"}).json()


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    return config(tmp_path, {"conductor": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}}})


def _chat_loop(c: openai.OpenAI, stream: bool) -> tuple[list, list]:
    """What an agent does: call, run the tool it asks for, send the result back, until it answers."""
    messages: list = [{"role": "system", "content": "Use tools when they help."}, {"role": "user", "content": "What is the weather in Paris?"}]
    replies = []
    for _ in range(3):
        if stream:
            chunks = list(c.chat.completions.create(model="conductor", messages=messages, tools=[WEATHER], stream=True))
            calls: dict[int, dict] = {}
            for chunk in chunks:
                for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    call = calls.setdefault(d.index, {"id": d.id, "type": "function", "function": {"name": "", "arguments": ""}})
                    call["function"]["name"] += d.function.name or ""
                    call["function"]["arguments"] += d.function.arguments or ""
            text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            finish = chunks[-1].choices[0].finish_reason
            replies.append((finish, text, chunks[-1].model_extra["conductor"]["trace_id"]))
            assistant = {"role": "assistant", "content": text or None, **({"tool_calls": list(calls.values())} if calls else {})}
        else:
            reply = c.chat.completions.create(model="conductor", messages=messages, tools=[WEATHER])
            message = reply.choices[0].message
            replies.append((reply.choices[0].finish_reason, message.content, reply.model_extra["conductor"]["trace_id"]))
            assistant = message.model_dump(exclude_none=True)
            calls = {i: c.model_dump() for i, c in enumerate(message.tool_calls or [])}
        messages.append(assistant)
        if replies[-1][0] != "tool_calls":
            return replies, messages
        for call in calls.values():
            city = json.loads(call["function"]["arguments"])["city"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"18 degrees and sunny in {city}"})
    return replies, messages


@pytest.mark.parametrize("stream", [False, True])
def test_chat_tool_loop_with_the_openai_client(cfg, stream):
    with serve(cfg) as url:
        replies, messages = _chat_loop(client(url), stream)
        first, second = (trace(url, r[2]) for r in replies)
    assert [r[0] for r in replies] == ["tool_calls", "stop"]
    call = messages[2]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "simulated"}
    assert replies[1][1].startswith("beta answer")
    # the conductor and every worker were told that tools exist; the final step saw the tool result
    assert "Tools the final step may call" in first["question"] and "get_weather" in first["question"]
    assert first["tool_calls"][0]["name"] == "get_weather" and first["steps"][-1]["tool_calls"]
    assert "18 degrees and sunny in simulated" in second["steps"][-1]["messages"][0]["content"]
    assert "18 degrees and sunny" in second["steps"][0]["messages"][0]["content"]  # earlier steps read it too


@pytest.mark.parametrize("stream", [False, True])
def test_responses_tool_loop_with_the_openai_client(cfg, stream):
    tool = {"type": "function", **WEATHER["function"]}
    with serve(cfg) as url:
        c = client(url)
        items: list = [{"role": "user", "content": "Weather in Paris?"}]
        if stream:
            events = list(c.responses.create(model="conductor", input=items, tools=[tool], stream=True))
            first = events[-1].response
            added = [e.item.type for e in events if e.type == "response.output_item.added"]
            assert added == ["function_call"] and "response.function_call_arguments.done" in [e.type for e in events]
        else:
            first = c.responses.create(model="conductor", input=items, tools=[tool])
        calls = [o for o in first.output if o.type == "function_call"]
        assert len(calls) == 1 and calls[0].name == "get_weather" and first.tools[0].name == "get_weather"
        items += [o.model_dump(exclude_none=True) for o in first.output]
        items.append({"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 degrees"})
        second = c.responses.create(model="conductor", input=items, tools=[tool])
        run = trace(url, second.model_extra["conductor"]["trace_id"])
    assert second.output_text.startswith("beta answer") and [o.type for o in second.output] == ["message"]
    assert "Tool result for get_weather" in run["question"] and "18 degrees" in run["steps"][-1]["messages"][0]["content"]


def test_tool_choice_none_and_forced(cfg):
    with serve(cfg) as url:
        c = client(url)
        none = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], tools=[WEATHER], tool_choice="none")
        forced = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], tools=[WEATHER],
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
        legacy = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], functions=[WEATHER["function"]])
    assert none.choices[0].finish_reason == "stop" and none.choices[0].message.tool_calls is None
    assert forced.choices[0].finish_reason == "tool_calls" and forced.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert legacy.choices[0].finish_reason == "function_call" and legacy.choices[0].message.function_call.name == "get_weather"


# --------------------------------------------------------------------------------- structured output


def test_json_schema_and_json_object_answers_are_valid(cfg):
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": CITY_SCHEMA, "strict": True}}
    with serve(cfg) as url:
        c = client(url)
        schema = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], response_format=fmt)
        obj = c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], response_format={"type": "json_object"})
        resp = c.responses.create(model="conductor", input="q", text={"format": {"type": "json_schema", "name": "answer", "schema": CITY_SCHEMA}})
    assert json.loads(schema.choices[0].message.content)["answer"].startswith("beta answer")
    assert isinstance(json.loads(obj.choices[0].message.content), dict)
    assert set(json.loads(resp.output_text)) == {"answer"} and resp.text.format.type == "json_schema"


def test_an_answer_that_cannot_match_the_schema_is_a_clear_error(cfg):
    impossible = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1000}}, "required": ["n"]}
    with serve(cfg) as url:
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            client(url).chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}],
                                                response_format={"type": "json_schema", "json_schema": {"name": "big", "schema": impossible}})
    error = caught.value.body
    assert caught.value.status_code == 422 and error["code"] == "invalid_answer_format"
    assert "does not match the JSON schema 'big'" in error["message"] and "1000" in error["message"]


# ------------------------------------------------------------------- native, over loopback HTTP


def test_tools_and_json_schema_pass_natively_to_an_openai_compatible_upstream(tmp_path):
    upstream = create_upstream(latency_s=0.0)
    with running(upstream) as up:
        cfg = config(tmp_path, {"single": {"version": "v1", "pool": http_pool(tmp_path, up), "policy": "single"}})
        with serve(cfg) as url:
            c = client(url)
            plain = c.chat.completions.create(model="single", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER],
                                              parallel_tool_calls=False, stop=["END"], frequency_penalty=0.5)
            sent = httpx.get(f"{up}/control").json()["last_body"]
            chunks = list(c.chat.completions.create(model="single", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER],
                                                    stream=True))
            fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": CITY_SCHEMA}}
            structured = c.chat.completions.create(model="single", messages=[{"role": "user", "content": "q"}], response_format=fmt)
            sent_format = httpx.get(f"{up}/control").json()["last_body"]["response_format"]
    assert sent["tools"] == [WEATHER] and sent["parallel_tool_calls"] is False and sent["stop"] == ["END"]
    assert sent["frequency_penalty"] == 0.5 and sent["tool_choice"] == "auto"
    assert plain.choices[0].message.tool_calls[0].function.name == "get_weather"
    streamed = [d for ch in chunks if ch.choices for d in ch.choices[0].delta.tool_calls or []]
    assert streamed and json.loads(streamed[0].function.arguments) == {"city": "simulated"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert sent_format == {"type": "json_schema", "json_schema": {"name": "answer", "schema": CITY_SCHEMA}}
    assert json.loads(structured.choices[0].message.content)["answer"]


# --------------------------------------------------------------- the prompted path (no native tools)

TOOLS = [FunctionTool(name="get_weather", description="Current weather", parameters=WEATHER["function"]["parameters"])]


def test_prompted_tools_are_described_constrained_and_parsed():
    answer = AnswerFormat(tools=TOOLS)
    prepared = prepare([{"role": "user", "content": "task"}], answer, frozenset({"json_schema", "stop"}))
    assert "get_weather" in prepared.messages[0]["content"] and prepared.messages[0]["content"].startswith("task")
    assert prepared.native.json_format.json_schema == tool_reply_schema(answer) and not prepared.streams
    reply = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    done = prepared.finish(Completion(text=reply))
    assert [(c.name, json.loads(c.arguments)) for c in done.tool_calls] == [("get_weather", {"city": "Paris"})]  # the repeat is dropped
    assert done.finish_reason == "tool_calls" and done.text == ""
    assert prepared.finish(Completion(text='{"content": "It is sunny."}')).text == "It is sunny."
    cut = prepared.finish(Completion(text='{"content": "It is sun\\u00', finish_reason="length"))
    assert cut.text == "It is sun" and not cut.tool_calls
    with pytest.raises(AnswerFormatError, match="not an offered tool"):
        prepared.finish(Completion(text='{"tool_calls": [{"name": "rm_rf", "arguments": {}}]}'))
    schema = tool_reply_schema(AnswerFormat(tools=TOOLS, tool_choice="required", parallel_tool_calls=False))
    assert "anyOf" not in schema and schema["properties"]["tool_calls"]["maxItems"] == 1


def test_prompted_json_is_asked_for_and_validated():
    answer = AnswerFormat(json_format=JSONFormat(type="json_schema", name="a", schema=CITY_SCHEMA), stop=["STOP"])
    prepared = prepare([{"role": "user", "content": "task"}], answer, frozenset())
    assert "matches this JSON schema" in prepared.messages[0]["content"] and prepared.cut_stop and prepared.native is None
    assert json.loads(prepared.finish(Completion(text='```json\n{"answer": "Paris"}\n```')).text) == {"answer": "Paris"}
    with pytest.raises(AnswerFormatError, match="does not match"):
        prepared.finish(Completion(text='{"answer": 3}'))
    with pytest.raises(AnswerFormatError, match="not valid JSON"):
        prepared.finish(Completion(text="Paris"))
    natively = prepare([{"role": "user", "content": "task"}], answer, frozenset({"json_schema", "stop"}))
    assert natively.messages[0]["content"] == "task" and natively.native.json_format == answer.json_format and natively.native.stop == ["STOP"]
