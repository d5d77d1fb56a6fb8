"""Where graders do their work when called from async code: a grading process, else a thread.

``agrade`` runs this package's sync graders, and the code grader its text parsing, in a grading
process (this module run with ``python -m``; the pool is :mod:`._workers`): a grade that overruns is
killed there, and parsing in another process never holds the caller's GIL, so the event loop keeps
running. What cannot go there (a grader registered outside this package, arguments that are not
JSON) runs on a dedicated thread (:func:`off_loop`).

Requests: ``{"op": "grade", "kind", "module", "response", "reference", "options"}`` (``module``: the
one that registers ``kind``, imported first) answered with a ``Grade`` as a dict, and ``{"op":
"call", "fn": "openconductor.x:name", "args": [...]}`` answered with ``{"value": ...}``. Only
functions of this package are called.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, TypeVar

from ._workers import WorkerPool, serve

T = TypeVar("T")
log = logging.getLogger(__name__)

# A whole grade in the grading process; a grader's own limit (math: timeout_s) comes on top.
GRADE_TIMEOUT_S = 30.0

_threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="oc-grade")
_pool: Optional[WorkerPool] = None
_pool_lock = threading.Lock()


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` on the graders' threads (inline when already on one, e.g. a grader grading)."""
    if threading.current_thread().name.startswith("oc-grade"):
        return fn(*args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_threads, functools.partial(fn, *args, **kwargs))


def packaged(fn: Callable) -> bool:
    """A module-level function of this package: the grading process can import it by name."""
    return fn.__module__.startswith("openconductor.") and "." not in fn.__qualname__


def _json_safe(request: dict) -> bool:
    """Does ``request`` survive JSON unchanged (no tuples, sets, non-str keys, Fractions, ...)?"""
    try:
        return json.loads(json.dumps(request)) == request
    except (TypeError, ValueError):
        return False


def call_in_process(request: dict, limit: float) -> Optional[dict]:
    """Blocking (run it with :func:`off_loop`): the grading process's reply, with ``error`` and
    ``type`` if the call raised there; None if the request is not JSON or no grading process starts
    here. Raises WorkerTimeout after ``limit`` s (the process is killed and replaced)."""
    global _pool
    if not _json_safe(request):
        return None
    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool(__name__, size=min(2, os.cpu_count() or 1))
    try:
        return _pool.call(request, limit)
    except RuntimeError as exc:
        log.warning("grading process unavailable (%s); grading on a thread", exc)
        return None


def _handle(req: dict) -> dict:
    if req.get("op") == "grade":
        from openconductor.graders import grade

        importlib.import_module(req["module"])
        return grade(req["kind"], req["response"], req["reference"], **req["options"]).to_dict()
    module, _, name = str(req.get("fn", "")).partition(":")
    if not module.startswith("openconductor.") or not name.isidentifier():
        raise ValueError(f"not a function of this package: {req.get('fn')!r}")
    return {"value": getattr(importlib.import_module(module), name)(*req.get("args", []))}


if __name__ == "__main__":
    serve(_handle, "OPENCONDUCTOR_GRADER_MAX_AS", 2 << 30)
