"""math-verify in worker processes with a hard wall-clock limit.

math-verify's own timeouts use ``signal.alarm``, which only works on the main thread (TRL calls
rewards from a thread), and sympy can hang on hostile input (``10^{10^{10}}``). So it runs here with
its timeouts off, in a child process that is killed and replaced when a call exceeds its limit.
The protocol is one JSON object per line on stdin/stdout.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import selectors
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds `openconductor`


class MathVerifyTimeout(Exception):
    pass


class _Worker:
    def __init__(self, start_timeout: float) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "openconductor.graders._mathworker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        if self._readline(start_timeout) != {"ready": True}:
            self.kill()
            raise RuntimeError("math-verify worker failed to start (is math-verify installed?)")

    def _readline(self, timeout: float) -> Optional[dict]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise MathVerifyTimeout
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def call(self, gold: str, pred: str, timeout: float) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"gold": gold, "pred": pred}) + "\n")
        self.proc.stdin.flush()
        reply = self._readline(timeout)
        if reply is None:
            raise RuntimeError("math-verify worker exited")
        return reply

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class MathVerifyPool:
    """At most ``size`` workers, started on demand; a worker that overruns is killed and replaced."""

    def __init__(self, size: int = 2, start_timeout: float = 120.0) -> None:
        # LIFO: reuse a started worker before starting another one
        self._idle: "queue.LifoQueue[Optional[_Worker]]" = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a slot whose worker is not started yet
        self._start_timeout = start_timeout
        self._all: list[_Worker] = []
        self._lock = threading.Lock()

    def verify(self, gold: str, pred: str, timeout: float) -> dict:
        worker = self._idle.get()
        try:
            if worker is None or worker.proc.poll() is not None:
                worker = _Worker(self._start_timeout)
                with self._lock:
                    self._all.append(worker)
            reply = worker.call(gold, pred, timeout)
        except BaseException:
            if worker is not None:
                worker.kill()
            self._idle.put(None)
            raise
        self._idle.put(worker)
        return reply

    def close(self) -> None:
        with self._lock:
            for worker in self._all:
                worker.kill()
            self._all.clear()


_pool: Optional[MathVerifyPool] = None
_pool_lock = threading.Lock()


def get_pool() -> MathVerifyPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = MathVerifyPool(size=min(2, os.cpu_count() or 1))
            atexit.register(_pool.close)
        return _pool


# ------------------------------------------------------------------------------------ worker side


def _serve() -> None:
    import logging
    import resource

    # Bound what one hostile expression can take (10^{10^{10}} builds a huge integer) before the
    # parent's wall-clock limit kills us: a MemoryError is then just "not verified".
    limit = int(os.environ.get("OPENCONDUCTOR_MATHVERIFY_MAX_AS", str(4 << 30)))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    logging.disable(logging.WARNING)  # math-verify warns on every call that its timeouts are off
    from math_verify import parse, verify

    def as_latex(text: str) -> str:
        return text if ("$" in text or "\\boxed" in text or "\\(" in text) else f"${text}$"

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            gold = parse(as_latex(req["gold"]), parsing_timeout=None)
            pred = parse(req["pred"], parsing_timeout=None)
            ok = bool(gold and pred and verify(gold, pred, timeout_seconds=None))
            reply = {
                "ok": ok,
                "gold": str(gold[-1]) if gold else None,
                "pred": str(pred[-1]) if pred else None,
                "error": None if gold else "reference could not be parsed",
            }
        except Exception as exc:  # a parser crash grades as "not verified", never kills the worker
            reply = {"ok": False, "gold": None, "pred": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    _serve()
