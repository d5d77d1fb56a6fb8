"""math-verify in worker processes with a hard wall-clock limit.

math-verify's own timeouts use ``signal.alarm``, which only works on the main thread (TRL calls
rewards from a thread), and sympy can hang on hostile input (``10^{10^{10}}``). So it runs here with
its timeouts off, in a child process (:mod:`._workers`) that is killed and replaced when a call
exceeds its limit. The worker's address space is capped (``OPENCONDUCTOR_MATHVERIFY_MAX_AS``, 4 GiB):
a huge integer is then a MemoryError, i.e. "not verified".
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from ._workers import WorkerPool, WorkerTimeout, serve

MathVerifyTimeout = WorkerTimeout

_pool: Optional[WorkerPool] = None
_pool_lock = threading.Lock()


def verify(gold: str, pred: str, timeout: float) -> dict:
    """``{"ok", "gold", "pred", "error"}`` from math-verify; MathVerifyTimeout after ``timeout`` s."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool(__name__, size=min(2, os.cpu_count() or 1))
    return _pool.call({"gold": gold, "pred": pred}, timeout)


def _serve() -> None:
    import logging

    logging.disable(logging.WARNING)  # math-verify warns on every call that its timeouts are off
    from math_verify import parse, verify as mv_verify

    def as_latex(text: str) -> str:
        return text if ("$" in text or "\\boxed" in text or "\\(" in text) else f"${text}$"

    def handle(req: dict) -> dict:
        try:
            gold = parse(as_latex(req["gold"]), parsing_timeout=None)
            pred = parse(req["pred"], parsing_timeout=None)
            ok = bool(gold and pred and mv_verify(gold, pred, timeout_seconds=None))
        except Exception as exc:  # a parser crash grades as "not verified"
            return {"ok": False, "gold": None, "pred": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        return {
            "ok": ok,
            "gold": str(gold[-1]) if gold else None,
            "pred": str(pred[-1]) if pred else None,
            "error": None if gold else "reference could not be parsed",
        }

    serve(handle, "OPENCONDUCTOR_MATHVERIFY_MAX_AS", 4 << 30)


if __name__ == "__main__":
    _serve()
