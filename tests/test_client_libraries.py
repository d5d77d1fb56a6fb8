"""The client libraries people use, unchanged, against `conductor serve` on loopback: the openai SDK, LangChain's
ChatOpenAI and litellm, each with a plain answer, streaming, tools (a full tool loop) and structured output.

The pool is SIMULATED (no model: fixed plans and texts; the final step calls the first offered tool until a
tool result is in its context, and fills a requested JSON schema), so what is checked is the wire protocol
each library speaks, not answer quality. No test may reach the network: every connection and name lookup
to anything but loopback fails the test (litellm is told to use its bundled model cost map and stay offline).
"""

from __future__ import annotations

import json
import socket

import openai
import pytest
from pydantic import BaseModel

from _server_kit import KEY, config, serve, sim_pool

pytestmark = pytest.mark.timeout(120)

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


REACHED: list[str] = []  # every attempt to leave loopback, from the moment this module's fixtures start


@pytest.fixture(scope="module", autouse=True)
def no_network():
    """Connections and name lookups outside loopback fail (OSError, so a library gives up at once) and are
    recorded; each test then fails if any was made, even one a library caught and ignored."""
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
            REACHED.append(f"connect {address}")
            raise OSError(f"network access in a test: {address}")
        return connect(sock, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host is not None and (host.decode() if isinstance(host, bytes) else host) not in LOOPBACK:
            REACHED.append(f"lookup {host!r}")
            raise socket.gaierror(f"network access in a test: {host!r}")
        return getaddrinfo(host, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", guarded_connect)
    mp.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def stayed_on_loopback(no_network):
    yield
    assert not REACHED, f"a client library reached for the network: {REACHED}"


@pytest.fixture(scope="module")
def url(tmp_path_factory, no_network):
    directory = tmp_path_factory.mktemp("clients")
    cfg = config(directory, {"conductor": {"version": "v1", "pool": sim_pool(directory), "policy": "conductor",
                                           "limits": {"max_calls": 6, "max_depth": 0}}})
    with serve(cfg) as base:
        yield base


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
QUESTION = "What is the weather in Paris?"


class Verdict(BaseModel):
    answer: str
    confidence: float


def tool_result(call_id: str, arguments: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": f"18 degrees in {json.loads(arguments)['city']}"}


# ---------------------------------------------------------------------------------------- openai SDK


def test_openai_sdk(url):
    c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, timeout=30)
    messages = [{"role": "user", "content": QUESTION}]
    plain = c.chat.completions.create(model="conductor", messages=messages)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(model="conductor", messages=messages, stream=True)
                       if ch.choices)
    first = c.chat.completions.create(model="conductor", messages=messages, tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    history = messages + [first.choices[0].message.model_dump(), tool_result(call.id, call.function.arguments)]
    second = c.chat.completions.create(model="conductor", messages=history, tools=[WEATHER])
    parsed = c.chat.completions.parse(model="conductor", messages=messages, response_format=Verdict)
    response = c.responses.create(model="conductor", input=QUESTION)
    assert plain.choices[0].message.content.startswith("beta answer") and streamed.startswith("beta answer")
    assert first.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == {"city": "simulated"}
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content
    assert isinstance(parsed.choices[0].message.parsed, Verdict)
    assert response.output_text.startswith("beta answer")


# ---------------------------------------------------------------------------------- LangChain ChatOpenAI


def test_langchain_chat_openai(url):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"18 degrees in {city}"

    llm = ChatOpenAI(model="conductor", base_url=url + "/v1", api_key=KEY, timeout=30)
    plain = llm.invoke(QUESTION)
    streamed = "".join(chunk.content for chunk in llm.stream(QUESTION))
    agent = llm.bind_tools([get_weather])
    messages = [HumanMessage(QUESTION)]
    first = agent.invoke(messages)
    call = first.tool_calls[0]
    messages += [first, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    second = agent.invoke(messages)
    structured = llm.with_structured_output(Verdict).invoke(QUESTION)
    assert plain.content.startswith("beta answer") and streamed.startswith("beta answer")
    assert call["name"] == "get_weather" and call["args"] == {"city": "simulated"}
    assert second.content and not second.tool_calls
    assert isinstance(structured, Verdict)


# -------------------------------------------------------------------------------------------- litellm


@pytest.fixture(scope="module")
def litellm(no_network):
    mp = pytest.MonkeyPatch()
    # The cost map litellm fetches at import, and every other fetch of its own: bundled copies instead.
    mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    mp.setenv("LITELLM_OFFLINE_MODE", "true")
    import litellm as module

    yield module
    mp.undo()


def test_litellm(url, litellm):
    args = dict(model="openai/conductor", api_base=url + "/v1", api_key=KEY, timeout=30)
    messages = [{"role": "user", "content": QUESTION}]
    plain = litellm.completion(messages=messages, **args)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in litellm.completion(messages=messages, stream=True, **args) if ch.choices)
    first = litellm.completion(messages=messages, tools=[WEATHER], **args)
    call = first.choices[0].message.tool_calls[0]
    history = messages + [first.choices[0].message.model_dump(), tool_result(call.id, call.function.arguments)]
    second = litellm.completion(messages=history, tools=[WEATHER], **args)
    structured = litellm.completion(messages=messages, response_format=Verdict, **args)
    assert plain.choices[0].message.content.startswith("beta answer") and streamed.startswith("beta answer")
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert second.choices[0].message.content and not second.choices[0].message.tool_calls
    assert isinstance(Verdict.model_validate_json(structured.choices[0].message.content), Verdict)
