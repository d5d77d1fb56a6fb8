"""Killable helper processes for graders: one JSON object per line over pipes, a time limit per call.

Grading work runs in these processes rather than in the caller's for two reasons. A call that
overruns its limit is ended by killing its process (sympy can hang inside C code; a regex match in C
cannot be interrupted at all). And parsing in another process never holds the caller's GIL, so an
event loop that awaits a grade keeps running: with hostile inputs graded on threads the loop stalled
60-175 ms, in a process under 12 ms (tests/test_graders_adversarial.py measures it).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import resource
import selectors
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Optional

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds `openconductor`


class WorkerTimeout(Exception):
    """The call exceeded its time limit; the worker was killed (and will be replaced)."""


class _Worker:
    def __init__(self, module: str, start_timeout: float) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        try:
            ready = self._readline(start_timeout)
        except WorkerTimeout:
            ready = None
        if ready != {"ready": True}:
            self.kill()
            raise RuntimeError(f"worker `python -m {module}` failed to start")

    def _readline(self, timeout: float) -> Optional[dict]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise WorkerTimeout
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def call(self, request: dict, timeout: float) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._readline(timeout)
        if reply is None:
            raise RuntimeError("worker exited")
        return reply

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class WorkerPool:
    """At most ``size`` workers running ``python -m module``, started on demand; a worker that overruns
    (or fails) is killed and replaced on the next call."""

    def __init__(self, module: str, size: int = 2, start_timeout: float = 120.0) -> None:
        self.module = module
        # LIFO: reuse a started worker before starting another one
        self._idle: "queue.LifoQueue[Optional[_Worker]]" = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a slot whose worker is not started yet
        self._start_timeout = start_timeout
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def call(self, request: dict, timeout: float) -> dict:
        """Send one request; raise WorkerTimeout after ``timeout`` s, RuntimeError if no worker runs."""
        worker = self._idle.get()
        try:
            if worker is None or worker.proc.poll() is not None:
                worker = _Worker(self.module, self._start_timeout)
                with self._lock:
                    self._all.append(worker)
            reply = worker.call(request, timeout)
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


def serve(handle: Callable[[dict], dict], max_as_env: str, max_as_default: int) -> None:
    """Worker side: cap the address space (soft limit, so helpers it starts may set their own), say
    ready, then answer each request line; an exception becomes ``{"error": ...}``, never an exit."""
    limit = int(os.environ.get(max_as_env, str(max_as_default)))
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        try:
            reply = handle(json.loads(line))
        except Exception as exc:
            reply = {"error": str(exc)[:1000], "type": type(exc).__name__}
        print(json.dumps(reply), flush=True)
