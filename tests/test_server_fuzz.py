"""Property-based tests (Hypothesis) over the request path the server runs in its check process: any body,
any field set to any JSON value, any schema, is either accepted or refused with a 4xx APIError that says
why; never another exception (which would be a 500). Accepted schemas validate any value in bounded time."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from openconductor.json_schemas import SchemaProblem, ValidationTooCostly, check_schema, first_error
from openconductor.server.bodies import decode_json, interpret_body
from openconductor.server.errors import APIError
from openconductor.server.chat_request import ChatCompletionRequest, interpret_chat
from openconductor.server.responses_request import ResponsesRequest, interpret_responses

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEAVES = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(max_size=12) | st.sampled_from(["user", "assistant", "tool", "system", "function", "text", "json_schema", "auto"]))
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)

KEYWORDS = ["type", "properties", "items", "prefixItems", "$ref", "$defs", "definitions", "allOf", "anyOf", "oneOf", "not", "if", "then",
            "else", "required", "enum", "const", "minimum", "maxLength", "pattern", "additionalProperties", "uniqueItems", "$anchor",
            "dependentSchemas", "contains", "propertyNames", "a", "b"]
SCHEMA_LEAVES = LEAVES | st.sampled_from(["#", "#/$defs/a", "#/properties/a", "#/allOf/0", "#a", "string", "object", "array", "banana", "^a+$"])
SCHEMAS = st.recursive(SCHEMA_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=4),
                       max_leaves=30)

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}}
RESPONSES = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}],
             "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
             "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}}}}
APIS = {"chat": (ChatCompletionRequest, interpret_chat, CHAT), "responses": (ResponsesRequest, interpret_responses, RESPONSES)}


def outcome(api: str, body) -> str:
    schema, interpret, _ = APIS[api]
    try:
        accepted, question = interpret_body(schema, interpret, body, 64, 20_000)
    except APIError as exc:
        assert 400 <= exc.status < 500 and exc.message, (exc.status, exc.message)
        json.dumps(exc.body())  # the error object is JSON
        return "refused"
    assert isinstance(question, str) and question.strip()
    return "accepted"


def put(body: dict, path: tuple, value) -> dict:
    """A deep copy of ``body`` with ``value`` at ``path`` (keys and list indexes)."""
    out = json.loads(json.dumps(body))
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


@FUZZ
@given(api=st.sampled_from(sorted(APIS)), body=st.dictionaries(st.sampled_from(sorted(set(ChatCompletionRequest.model_fields)
                                                                                       | set(ResponsesRequest.model_fields) | {"junk"})),
                                                                JSON, max_size=6))
def test_any_body_is_accepted_or_a_4xx(api, body):
    outcome(api, body)


CHAT_PLACES = [(f,) for f in ChatCompletionRequest.model_fields] + [
    ("messages", 0, "content"), ("messages", 0, "role"), ("messages", 0), ("messages",), ("tools", 0, "function", "name"),
    ("tools", 0, "function", "parameters"), ("tools", 0, "function", "parameters", "properties", "a"), ("tools", 0, "type"),
    ("response_format", "json_schema", "schema"), ("response_format", "type"), ("response_format", "json_schema")]
RESPONSES_PLACES = [(f,) for f in ResponsesRequest.model_fields] + [
    ("input", 0, "content"), ("input", 0, "role"), ("input", 0, "type"), ("input", 0), ("tools", 0, "name"), ("tools", 0, "parameters"),
    ("text", "format", "schema"), ("text", "format", "type"), ("text", "format")]


@pytest.mark.parametrize("api, place", [("chat", p) for p in CHAT_PLACES] + [("responses", p) for p in RESPONSES_PLACES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON | st.text(max_size=70))
def test_any_field_set_to_any_value_is_accepted_or_a_4xx(api, place, value):
    outcome(api, put(APIS[api][2], place, value))


@FUZZ
@given(api_place=st.sampled_from([("chat", ("tools", 0, "function", "parameters")), ("chat", ("response_format", "json_schema", "schema")),
                                  ("responses", ("tools", 0, "parameters")), ("responses", ("text", "format", "schema"))]),
       schema=SCHEMAS)
def test_any_schema_in_a_request_is_accepted_or_a_4xx(api_place, schema):
    api, place = api_place
    outcome(api, put(APIS[api][2], place, schema))


@FUZZ
@given(schema=SCHEMAS, value=JSON)
def test_a_schema_the_door_accepts_validates_any_value_in_bounded_time(schema, value):
    try:
        check_schema(schema)
    except SchemaProblem as problem:
        assert problem.message
        return
    try:
        first_error(value, schema, budget_s=0.05)
    except ValidationTooCostly:
        pass


@FUZZ
@given(raw=st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode())
       | st.integers(1, 3000).map(lambda n: b'{"a": ' + b"[" * n + b"]" * n + b"}"))
def test_any_bytes_decode_to_an_object_or_a_4xx(raw):
    try:
        data = decode_json(raw, 64, 20_000)
    except APIError as exc:
        assert 400 <= exc.status < 500 and exc.code in ("empty_body", "invalid_json", "json_too_deep", "json_too_large")
        return
    assert isinstance(data, dict)
