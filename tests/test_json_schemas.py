"""Caller JSON schemas: what the door refuses (and where), and replies validated in bounded time."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from openconductor.answer_format import AnswerFormat, AnswerFormatError, JSONFormat, check_json
from openconductor.json_schemas import MAX_NODES, SchemaProblem, ValidationTooCostly, check_schema, first_error
from openconductor.pool import Pool, PoolSpec, WorkerCallError, WorkerSpec


@pytest.mark.parametrize("schema, where, words", [
    ({"type": "banana"}, "type", "'banana' is not a JSON Schema type"),
    ({"type": ["string", "banana"]}, "type", "'banana' is not a JSON Schema type"),
    ({"type": "object", "properties": {"a": 5}}, "properties.a", "5 is not of type 'object', 'boolean'"),
    ({"properties": {"a": {"prefixItems": [{"minimum": "x"}]}}}, "properties.a.prefixItems[0].minimum", "not of type 'number'"),
    ({"pattern": "("}, "pattern", "is not a 'regex'"),
    ({"$ref": "#"}, "", "$ref cycle"),
    ({"allOf": [{"$ref": "#"}]}, "", "$ref cycle"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "$defs.a", "#/$defs/a -> "),
    ({"not": {"if": {"$ref": "#/not"}}}, "not", "$ref cycle"),
    ({"$ref": "https://example.com/schema.json"}, "$ref", "only local references"),
    ({"$ref": "#/$defs/missing"}, "$ref", "points at nothing"),
    ({"$ref": "#/required", "required": ["a"]}, "$ref", "points at a list, not a schema"),
    ({"$ref": "#nowhere"}, "$ref", "no $anchor named 'nowhere'"),
    ([], "", "a JSON schema is an object"),
])
def test_the_door_refuses_unusable_schemas_and_says_where(schema, where, words):
    with pytest.raises(SchemaProblem) as problem:
        check_schema(schema)
    assert problem.value.where() == where
    assert words in problem.value.message


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"child": {"$ref": "#"}, "kids": {"type": "array", "items": {"$ref": "#"}}}},  # a tree
    {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"},
    {"$defs": {"x": {"$anchor": "leaf", "type": "string"}}, "anyOf": [{"$ref": "#leaf"}, {"type": "null"}]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "integer"}}, "properties": {"n": {"$ref": "#/definitions/a"}}},
    True,
])
def test_recursion_that_steps_into_the_value_is_fine(schema):
    check_schema(schema)


def test_size_and_chain_limits():
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_NODES)}}
    start = time.perf_counter()
    with pytest.raises(SchemaProblem, match="more than 5,000 JSON values"):
        check_schema(big)
    assert time.perf_counter() - start < 0.5  # refused before the (slow) metaschema check
    with pytest.raises(SchemaProblem, match="more than 5,000"):
        check_schema({"enum": list(range(MAX_NODES))})  # an enum's items count too
    chain = {"$defs": {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(40)} | {"a40": {"type": "string"}}, "$ref": "#/$defs/a0"}
    with pytest.raises(SchemaProblem, match="nest more than 32 deep"):
        check_schema(chain)


def test_validation_is_bounded_by_its_deadline():
    # 2^15 paths through oneOf diamonds: a small schema, exponential work for a value that fails at every leaf.
    defs = {f"a{i}": {"oneOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(15)}
    schema = {"$defs": {**defs, "a15": {"type": "string"}}, "$ref": "#/$defs/a0"}
    check_schema(schema)  # a DAG, not a cycle: the door lets it in
    start = time.perf_counter()
    with pytest.raises(ValidationTooCostly):
        first_error(5, schema, budget_s=0.03)
    assert time.perf_counter() - start < 0.2
    deep = current = {}
    for _ in range(5000):
        current["a"] = current = {}
    with pytest.raises(ValidationTooCostly):
        first_error(deep, {"properties": {"a": {"$ref": "#"}}}, budget_s=10)


def test_a_full_reply_to_a_schema_at_the_cap_fits_the_default_budget():
    """A legitimate reply that fills every property of the largest schema the door lets in: ~35 ms of CPU alone on
    2 cores. The earlier budget (20 ms, on the event loop) refused a 1,200-property one at random under load (a 422
    in clean-clone CI); the check now runs in a thread, with a budget that only hostile schemas reach."""
    n = (MAX_NODES - 3) // 2
    schema = {"type": "object", "properties": {f"field_{i:05d}": {"type": "string"} for i in range(n)}}
    check_schema(schema)
    assert first_error({f"field_{i:05d}": "x" for i in range(n)}, schema) is None
    assert "is not of type 'string'" in first_error({f"field_{i:05d}": "x" if i else 1 for i in range(n)}, schema).message


def test_the_garbage_collector_is_not_charged_to_the_budget():
    """A full collection costs the whole heap's time (a tenth of a second with torch imported) and lands in
    whichever validation allocates past the threshold: charged to the reply, it refused valid replies at random."""
    import gc

    from openconductor.json_schemas import _DEADLINE

    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    value = {f"p{i}": "x" for i in range(300)}
    collections = []

    def slow_collection(phase, _info):  # stands in for a big heap: 0.1 s of CPU in the first collection
        if phase == "start" and not collections and _DEADLINE.get() != float("inf"):  # once the budget runs
            collections.append(phase)
            start = time.thread_time()
            while time.thread_time() - start < 0.1:
                pass

    threshold = gc.get_threshold()
    gc.callbacks.append(slow_collection)
    gc.set_threshold(1)  # the validation's first allocation collects
    try:
        assert first_error(value, schema, budget_s=0.05) is None
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(slow_collection)
    assert collections, "no collection ran inside the validation, so the test showed nothing"


def test_unique_items_is_linear_and_compares_as_json_schema_does():
    items = [{"a": i} for i in range(20_000)]
    start = time.perf_counter()
    assert first_error(items, {"uniqueItems": True}, budget_s=5) is None
    # jsonschema's own pairwise fallback takes minutes here; the linear check well under a second alone, and up to a
    # few seconds inside a full suite on 2 busy cores (it failed there at 1 s), so the bound only tells the two apart
    assert time.perf_counter() - start < 10.0
    assert first_error(items + [{"a": 3}], {"uniqueItems": True}) is not None
    assert first_error([1, 1.0], {"uniqueItems": True}) is not None
    assert first_error([1, True], {"uniqueItems": True}) is None


def test_check_json_reports_a_reply_it_cannot_check_in_time():
    defs = {f"a{i}": {"oneOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(15)}
    fmt = JSONFormat(type="json_schema", name="r", schema={"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}},
                                                           "$defs": {**defs, "a15": {"type": "string"}}})
    with pytest.raises(AnswerFormatError, match="could not be checked"):
        check_json('{"x": 5}', fmt)
    with pytest.raises(AnswerFormatError, match="not valid JSON"):
        check_json("[" * 100_000, JSONFormat(type="json_object"))  # a RecursionError inside json.loads is the reply's fault
    assert check_json('{"y": 1}', fmt) == '{"y": 1}'  # x absent: nothing to expand


CATASTROPHIC = "(a|aa)+$"  # backtracks exponentially on "a" * n + "b", in re and in the regex module alike


@pytest.mark.parametrize("schema, value", [
    ({"type": "string", "pattern": CATASTROPHIC}, "a" * 40 + "b"),
    ({"type": "object", "patternProperties": {CATASTROPHIC: {"type": "integer"}}}, {"a" * 40 + "b": 1}),
    ({"type": "object", "patternProperties": {CATASTROPHIC: {}}, "additionalProperties": False}, {"a" * 40 + "b": 1}),
])
def test_a_catastrophic_pattern_stops_at_the_budget(schema, value):
    check_schema(schema)  # a valid schema: only matching it against this value is costly
    started = time.monotonic()
    with pytest.raises(ValidationTooCostly, match="pattern"):
        first_error(value, schema, budget_s=0.05)
    assert time.monotonic() - started < 2.0


def test_patterns_still_validate_as_json_schema_says():
    assert first_error("ab-12", {"type": "string", "pattern": r"^[a-z]+-\d+$"}) is None
    assert "does not match" in first_error("ab12", {"type": "string", "pattern": r"^[a-z]+-\d+$"}).message
    schema = {"type": "object", "properties": {"id": {}}, "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert first_error({"id": 1, "x-a": 2}, schema) is None
    assert "is not of type 'integer'" in first_error({"x-a": "two"}, schema).message
    assert "does not match any of the regexes" in first_error({"y": 1}, schema).message
    assert "Additional properties are not allowed" in first_error({"y": 1}, {"properties": {"id": {}}, "additionalProperties": False}).message
    assert first_error({"y": "s"}, {"additionalProperties": {"type": "integer"}}).message.endswith("is not of type 'integer'")


def test_a_reply_against_a_catastrophic_pattern_is_an_answer_format_error_in_bounded_time():
    fmt = JSONFormat(type="json_schema", name="r", schema={"type": "object", "properties": {"code": {"type": "string", "pattern": CATASTROPHIC}}})
    started = time.monotonic()
    with pytest.raises(AnswerFormatError, match="could not be checked"):
        check_json(json.dumps({"code": "a" * 40 + "b"}), fmt)
    assert time.monotonic() - started < 2.0
    assert check_json('{"code": "aaaa"}', fmt) == '{"code": "aaaa"}'


async def test_a_reply_that_cannot_be_checked_in_time_is_not_sampled_again():
    """The cost is the schema's (2^15 oneOf paths for any string), so another sample would spend the budget again."""
    defs = {f"a{i}": {"oneOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(15)}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "required": ["x"], "$defs": {**defs, "a15": {"type": "string"}}}
    spec = PoolSpec(name="t", workers=[WorkerSpec(name="w", provider="simulated", max_retries=2)])
    answer = AnswerFormat(json_format=JSONFormat(type="json_schema", name="diamonds", schema=schema))
    async with Pool(spec) as pool:
        with pytest.raises(WorkerCallError, match="could not be checked against the JSON schema 'diamonds'") as caught:
            await pool[0].call([{"role": "user", "content": "q"}], answer=answer)
    assert caught.value.attempts == 1 and caught.value.code == "invalid_answer_format"


def test_a_forked_child_still_checks_replies():
    """The reply-check thread does not survive a fork; the child gets its own (else its checks would wait forever)."""
    import multiprocessing

    assert _check_off_the_loop('{"n": 1}') == '{"n": 1}'  # the parent's thread has run
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_check_off_the_loop, ('{"n": 2}',)).get(timeout=30) == '{"n": 2}'


def _check_off_the_loop(reply: str) -> str:
    from openconductor.answer_format import off_the_loop

    fmt = JSONFormat(type="json_schema", name="r", schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    return asyncio.run(off_the_loop(check_json, reply, fmt))
