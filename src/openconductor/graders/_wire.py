"""Plain data across the sandbox boundary: Python values as tagged JSON trees.

What a candidate program returns reaches the tests (and the host) only as data: :func:`decode` builds
nothing but ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``complex``, ``list``,
``tuple``, ``dict``, ``set`` and ``frozenset``, so an object with a rigged ``__eq__`` (or any other
behaviour) cannot cross. Tuples, sets, non-string dict keys and non-finite floats keep their type, so
the tests compare exactly what the program returned.

This file is also pasted verbatim into the sandboxed harnesses (stdlib only, no ``__future__``
import, Python 3.8+ syntax).
"""

import base64
import math

WIRE_MAX_DEPTH = 200


class WireError(ValueError):
    """A value that cannot be sent, or a message that is not valid wire data."""


def _encode(value, depth):
    if depth > WIRE_MAX_DEPTH:
        raise WireError("value nested deeper than %d levels" % WIRE_MAX_DEPTH)
    if value is None or isinstance(value, (bool, str)):
        return str(value) if isinstance(value, str) and type(value) is not str else value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        value = float(value)
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, complex):
        return {"complex": [_encode(value.real, depth + 1), _encode(value.imag, depth + 1)]}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [_encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, frozenset):
        return {"frozenset": [_encode(v, depth + 1) for v in value]}
    if isinstance(value, set):
        return {"set": [_encode(v, depth + 1) for v in value]}
    raise WireError("cannot send a %s across the sandbox boundary (plain data only)" % type(value).__name__)


def to_wire(value):
    """``value`` as a JSON-ready tree (a subclass of a plain type is sent as that type)."""
    return _encode(value, 0)


_BUILD = {"tuple": tuple, "set": set, "frozenset": frozenset}


def _decode(obj, depth):
    if depth > WIRE_MAX_DEPTH:
        raise WireError("message nested deeper than %d levels" % WIRE_MAX_DEPTH)
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if type(obj) is list:
        return [_decode(v, depth + 1) for v in obj]
    if type(obj) is dict and len(obj) == 1:
        tag, body = next(iter(obj.items()))
        if tag in _BUILD and type(body) is list:
            return _BUILD[tag](_decode(v, depth + 1) for v in body)
        if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2 for p in body):
            return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in body}
        if tag == "float" and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "complex" and type(body) is list and len(body) == 2:
            return complex(_decode(body[0], depth + 1), _decode(body[1], depth + 1))
        if tag == "bytes" and type(body) is str:
            return base64.b64decode(body, validate=True)
    raise WireError("not wire data: %.80r" % (obj,))


def from_wire(tree):
    """The value a (JSON-parsed) wire tree stands for; WireError for anything else."""
    try:
        return _decode(tree, 0)
    except WireError:
        raise
    except (ValueError, TypeError, RecursionError) as exc:  # unhashable set item, bad base64, ...
        raise WireError("unreadable wire data: %s" % (str(exc)[:200],)) from None
