"""Function calling and structured output on a REAL local model (SmolLM2-135M, in-process llama.cpp)
through the server and the official openai client.

SmolLM2's chat template has no tool format, so the tools are prompted and the reply is decoded under
llama.cpp's JSON-schema constraint (answer_format.prepare): it is always a well-formed answer or call.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from _server_kit import KEY, config, serve, write_pool

pytestmark = [pytest.mark.slow, pytest.mark.realmodel, pytest.mark.timeout(600)]  # ~45 s of CPU

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture
def cfg(tmp_path):
    worker = {"name": "smollm2", "provider": "local_gguf", "model": "smollm2-135m-instruct", "max_tokens": 96, "temperature": 0.0,
              "concurrency": 1, "timeout_s": 300, "options": {"n_ctx": 2048}}
    pool = write_pool(tmp_path, "local-one", [worker])
    return config(tmp_path, {"local": {"version": "v1", "pool": pool, "policy": "single", "limits": {"max_calls": 2, "max_depth": 0}}})


def test_tool_loop_and_json_schema_on_a_real_local_model(cfg):
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=500)
        messages: list = [{"role": "user", "content": "What is the weather in Paris right now? Call the tool."}]
        first = c.chat.completions.create(model="local", messages=messages, tools=[WEATHER], tool_choice="required", seed=1)
        call = first.choices[0].message.tool_calls[0]
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "18 degrees Celsius and sunny"}]
        second = c.chat.completions.create(model="local", messages=messages, tools=[WEATHER], seed=1)
        run = httpx.get(f"{url}/v1/traces/{second.model_extra['conductor']['trace_id']}", headers={"Authorization": f"Bearer {KEY}"}).json()
        schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}}, "required": ["city", "country"]}
        structured = c.chat.completions.create(model="local", messages=[{"role": "user", "content": "Which city is the capital of France?"}],
                                               response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema}}, seed=1)
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    # The tool's result reached the model that wrote the final answer, which answered in text or called again.
    assert "18 degrees Celsius and sunny" in run["steps"][-1]["messages"][0]["content"]
    assert second.choices[0].finish_reason in ("stop", "tool_calls", "length")
    assert second.choices[0].message.content or second.choices[0].message.tool_calls
    assert set(json.loads(structured.choices[0].message.content)) >= {"city", "country"}
