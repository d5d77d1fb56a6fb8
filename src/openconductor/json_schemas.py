"""JSON Schemas that callers send (``response_format`` / ``text.format`` and tool ``parameters``):
checked once, in bounded work, and replies validated against them in bounded time.

``check_schema`` is the door: a size cap (every JSON value counts, so a 100,000-item ``enum`` is as
big as 100,000 properties), jsonschema's metaschema check (``{"type": "banana"}``, ``properties:
{"a": 5}``), and the references: only local ones (``#``, ``#/json/pointer``, ``#anchor``), each
pointing at a schema, with no cycle that applies a schema to the same value forever (``{"$ref": "#"}``,
two ``$defs`` that ``allOf`` each other); recursion through ``properties``/``items`` is fine, since
each step goes one level down a finite value. The metaschema check costs about half a millisecond
per subschema, so the cap is what bounds it; callers run it off the event loop.

``first_error`` validates a value (a model's reply) under a budget of the calling thread's CPU time,
checked at every keyword, with ``uniqueItems`` in linear time, so no reply and no schema (``anyOf``
diamonds through ``$defs`` are exponential) can hold the caller much longer than the budget. CPU
time, not wall time: on a busy machine a legitimate reply must not fail because others ran meanwhile.
"""

from __future__ import annotations

import contextvars
import functools
import gc
import threading
import time
import urllib.parse
from typing import Any, Iterator

MAX_NODES = 5_000  # JSON values in one schema (objects, arrays and scalars)
MAX_DEPTH = 48  # nesting of one schema's JSON
MAX_IN_PLACE_CHAIN = 32  # allOf/anyOf/oneOf/not/if/$ref applied to the same value, one inside another
# CPU seconds validating one reply. Callers run it on a thread of its own, not on the event loop (whose
# 50-ms bound the earlier 20-ms budget served): a legitimate full reply to a schema at MAX_NODES takes ~35 ms
# alone on 2 cores, and 20 ms for 1,200 properties, which that budget refused at random under load. Pure
# Python holds the GIL, so a costly schema still slows the loop while it is checked: hence a bound, not more.
REPLY_BUDGET_S = 0.1

# Keywords whose subschemas apply to the value itself (no step down into it): a cycle through these never ends.
IN_PLACE_ONE = ("not", "if", "then", "else")
IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
IN_PLACE_MAP = ("dependentSchemas", "dependencies")  # dependencies: draft 4-7, schemas or lists of names
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to a part of the value (a property, an item, a key).
DESCEND_ONE = ("additionalProperties", "additionalItems", "contains", "propertyNames", "unevaluatedItems",
               "unevaluatedProperties", "items")
DESCEND_LIST = ("prefixItems", "items")  # items: a list in drafts before 2020-12
DESCEND_MAP = ("properties", "patternProperties")
CONTAINERS = ("$defs", "definitions")  # schemas to refer to; not applied by themselves

Path = tuple[Any, ...]
TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


class SchemaProblem(ValueError):
    """A schema that cannot be used; ``path`` is where inside the schema (keys and indexes)."""

    def __init__(self, message: str, path: Path = ()):
        super().__init__(message)
        self.message, self.path = message, tuple(path)

    def where(self) -> str:
        """The path as dotted keys with [indexes], e.g. ``properties.a.items[0]`` ('' at the top)."""
        return dotted(self.path)


class ValidationTooCostly(Exception):
    """Validating a value would take longer than its budget (or nests deeper than Python can follow)."""


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ------------------------------------------------------------------------------------------ the door


def check_schema(schema: Any, *, max_nodes: int = MAX_NODES) -> None:
    """Raise SchemaProblem unless ``schema`` is a usable JSON schema (see the module docstring)."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaProblem(f"a JSON schema is an object (or true/false), not {type(schema).__name__}")
    _check_size(schema, max_nodes)
    _check_meta(schema)
    _check_references(schema)


def _check_size(schema: Any, max_nodes: int) -> None:
    count, stack = 0, [(schema, 0)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > max_nodes:
            raise SchemaProblem(f"the schema has more than {max_nodes:,} JSON values; at most {max_nodes:,} are accepted")
        if depth > MAX_DEPTH:
            raise SchemaProblem(f"the schema nests more than {MAX_DEPTH} levels deep")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _check_meta(schema: Any) -> None:
    import jsonschema  # the serve extra; imported on use

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = tuple(exc.path)
        if path and path[-1] == "type":
            names = exc.instance if isinstance(exc.instance, list) else [exc.instance]
            bad = next((n for n in names if n not in TYPES), exc.instance)
            raise SchemaProblem(f"{bad!r} is not a JSON Schema type ({', '.join(TYPES)})", path) from None
        raise SchemaProblem(exc.message, path) from None


def _subschemas(node: dict, path: Path) -> Iterator[tuple[Path, Any, bool]]:
    """(path, subschema, applies to the same value) for each subschema directly inside ``node``."""
    for kw in IN_PLACE_ONE + DESCEND_ONE:
        if isinstance(node.get(kw), (dict, bool)):
            yield (*path, kw), node[kw], kw in IN_PLACE_ONE
    for kw in IN_PLACE_LIST + DESCEND_LIST:
        if isinstance(node.get(kw), list):
            for i, sub in enumerate(node[kw]):
                yield (*path, kw, i), sub, kw in IN_PLACE_LIST
    for kw in IN_PLACE_MAP + DESCEND_MAP + CONTAINERS:
        if isinstance(node.get(kw), dict):
            for name, sub in node[kw].items():
                if isinstance(sub, (dict, bool)):
                    yield (*path, kw, name), sub, kw in IN_PLACE_MAP


class _Graph:
    """Every subschema by path, its anchors, and the edges that apply a schema to the same value."""

    def __init__(self, root: Any):
        self.root = root
        self.nodes: dict[Path, Any] = {}
        self.anchors: dict[str, Path] = {}
        self.in_place: dict[Path, list[Path]] = {}
        self.unlinked: list[tuple[Path, str, Any]] = []  # (path, keyword, reference) not yet resolved
        self.add((), root)

    def add(self, path: Path, schema: Any) -> None:
        stack = [(path, schema)]
        while stack:
            path, node = stack.pop()
            if path in self.nodes:
                continue
            self.nodes[path] = node
            self.in_place[path] = []
            if not isinstance(node, dict):
                continue
            for kw in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(kw), str):
                    self.anchors.setdefault(node[kw], path)
            self.unlinked += [(path, kw, node[kw]) for kw in REF_KEYWORDS if kw in node]
            for sub_path, sub, same_value in _subschemas(node, path):
                if same_value:
                    self.in_place[path].append(sub_path)
                stack.append((sub_path, sub))

    def resolve(self, ref: Any, where: Path) -> Path:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaProblem(f"$ref {ref!r}: only local references (#, #/$defs/name, #anchor) are supported", where)
        fragment = urllib.parse.unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            if fragment not in self.anchors:
                raise SchemaProblem(f"$ref {ref!r}: no $anchor named {fragment!r}", where)
            return self.anchors[fragment]
        target, path = self.root, []
        for token in fragment.split("/")[1:] if fragment else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
                path.append(token)
            elif isinstance(target, list) and token.isascii() and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
                path.append(int(token))
            else:
                raise SchemaProblem(f"$ref {ref!r} points at nothing in this schema", where)
        if not isinstance(target, (dict, bool)):
            raise SchemaProblem(f"$ref {ref!r} points at a {type(target).__name__}, not a schema", where)
        self.add(tuple(path), target)
        return tuple(path)

    def link_references(self) -> None:
        while self.unlinked:  # resolving may add subschemas (a ref into an unusual place) with references of their own
            path, kw, ref = self.unlinked.pop()
            self.in_place[path].append(self.resolve("#" if kw == "$recursiveRef" else ref, (*path, kw)))


def _check_references(schema: Any) -> None:
    """Local references only, each to a schema; no cycle and no over-long chain of same-value subschemas."""
    graph = _Graph(schema)
    graph.link_references()
    _check_cycles(graph)


def _check_cycles(graph: _Graph) -> None:
    """Depth-first over same-value edges (iterative): a back edge is a cycle; also the longest chain."""
    longest: dict[Path, int] = {}
    on_path: dict[Path, int] = {}
    for start in graph.nodes:
        if start in longest:
            continue
        stack: list[tuple[Path, Iterator[Path]]] = [(start, iter(graph.in_place[start]))]
        trail = [start]
        on_path[start] = 0
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                stack.pop()
                trail.pop()
                del on_path[node]
                longest[node] = 1 + max((longest[c] for c in graph.in_place[node]), default=0)
                if longest[node] > MAX_IN_PLACE_CHAIN:
                    raise SchemaProblem(f"subschemas applied to the same value (allOf/anyOf/oneOf/not/if/$ref) nest more than "
                                        f"{MAX_IN_PLACE_CHAIN} deep", node)
                continue
            if nxt in on_path:
                cycle = " -> ".join("#" + "".join(f"/{p}" for p in step) for step in trail[on_path[nxt]:] + [nxt])
                raise SchemaProblem(f"$ref cycle that never steps into the value (it would recurse forever): {cycle}", nxt)
            if nxt not in longest:
                on_path[nxt] = len(trail)
                trail.append(nxt)
                stack.append((nxt, iter(graph.in_place[nxt])))


# -------------------------------------------------------------------------------------- validating


_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar("schema_deadline", default=float("inf"))


class _Collector(threading.local):
    """CPU seconds this thread has spent in the garbage collector (a collection runs in the thread that
    allocated past the threshold, and its cost is the whole heap's, not the reply's)."""

    spent = 0.0
    started = 0.0


_COLLECTOR = _Collector()


def _count_collection(phase: str, _info: dict) -> None:
    if phase == "start":
        _COLLECTOR.started = time.thread_time()
    else:
        _COLLECTOR.spent += time.thread_time() - _COLLECTOR.started


gc.callbacks.append(_count_collection)


def _budget_clock() -> float:
    """This thread's CPU time less its time in the garbage collector: what a validation's budget is charged."""
    return time.thread_time() - _COLLECTOR.spent


def _timed(keyword):
    def check(validator, value, instance, schema):
        if _budget_clock() > _DEADLINE.get():
            raise ValidationTooCostly("validation ran over its time budget")
        return keyword(validator, value, instance, schema)

    return check


def _canonical(value: Any) -> Any:
    """A hashable form in which equal JSON values (as JSON Schema compares them: 1 == 1.0, true != 1) are equal."""
    if isinstance(value, bool) or value is None:
        return ("c", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, list):
        return ("l", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("d", frozenset((k, _canonical(v)) for k, v in value.items()))
    return ("s", value)


def _unique_items(validator, unique, instance, schema):
    """uniqueItems in linear time (jsonschema's falls back to comparing every pair of objects)."""
    import jsonschema

    if not unique or not validator.is_type(instance, "array"):
        return
    seen = set()
    for i, item in enumerate(instance):
        key = _canonical(item)
        if key in seen:
            yield jsonschema.ValidationError(f"the array has non-unique elements (item {i} repeats an earlier one)")
            return
        seen.add(key)


def _search(pattern: str, text: str) -> bool:
    """``re.search`` for a caller's pattern, stopped at the reply's deadline: a catastrophic pattern
    (``(a|aa)+$`` against ``"a" * 40 + "b"``) backtracks inside one C call, where the per-keyword check cannot
    reach it. The ``regex`` module takes a timeout (wall time, the nearest it offers)."""
    import regex

    left = _DEADLINE.get() - _budget_clock()
    if left <= 0:
        raise ValidationTooCostly("validation ran over its time budget")
    try:
        return regex.search(pattern, text, timeout=min(left, 3600.0)) is not None
    except TimeoutError:
        raise ValidationTooCostly(f"the pattern {pattern!r} took longer than the budget to match") from None
    except regex.error as exc:  # checked at the door for requests; a Python caller's schema may still hold one
        raise ValidationTooCostly(f"the pattern {pattern!r} is not a regular expression: {exc}") from None


def _pattern(validator, pattern, instance, schema):
    import jsonschema

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    """jsonschema's keyword, with the patternProperties match through ``_search``."""
    import jsonschema
    from jsonschema._utils import extras_msg

    if not validator.is_type(instance, "object"):
        return
    named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = {k for k in instance if k not in named and not any(_search(p, k) for p in patterns)}
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if patterns:
            joined = ", ".join(repr(each) for each in sorted(extras))
            yield jsonschema.ValidationError(f"{joined} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: "
                                             + ", ".join(repr(each) for each in sorted(patterns)))
        else:
            yield jsonschema.ValidationError("Additional properties are not allowed (%s %s unexpected)" % extras_msg(sorted(extras, key=str)))


# The keywords that run a caller's regular expression, each bounded by the reply's deadline.
_REGEX_KEYWORDS = {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties}


@functools.lru_cache(maxsize=None)
def _bounded(base: type) -> type:
    import jsonschema

    keywords = {name: _timed(fn) for name, fn in base.VALIDATORS.items()}
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _timed(_unique_items)
    keywords.update({name: _timed(fn) for name, fn in _REGEX_KEYWORDS.items() if name in keywords})
    return jsonschema.validators.extend(base, keywords)


def warm() -> None:
    """Import jsonschema and build the bounded validators now: a server does it at start, not inside its
    first request's reply check (the import alone is a tenth of a second on the event loop)."""
    import jsonschema

    for base in (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
                 jsonschema.Draft201909Validator, jsonschema.Draft202012Validator):
        _bounded(base)


def first_error(value: Any, schema: Any, *, budget_s: float = REPLY_BUDGET_S):
    """The most relevant jsonschema ValidationError of ``value`` against ``schema`` (checked at the door), or
    None; ValidationTooCostly when it takes longer than ``budget_s`` or nests too deeply."""
    import jsonschema

    cls = _bounded(jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))
    token = _DEADLINE.set(_budget_clock() + budget_s)
    try:
        return jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    except RecursionError:
        raise ValidationTooCostly("the value and schema nest too deeply to check") from None
    except ValidationTooCostly:
        raise
    except Exception as exc:  # a schema not checked at the door (a Python caller's) can break a keyword
        raise ValidationTooCostly(f"the schema could not be applied ({type(exc).__name__}: {exc})") from None
    finally:
        _DEADLINE.reset(token)


__all__ = ["MAX_NODES", "SchemaProblem", "ValidationTooCostly", "check_schema", "dotted", "first_error", "warm"]
