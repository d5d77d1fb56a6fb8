"""Run untrusted Python (LLM-written code) in a bubblewrap sandbox with hard resource limits.

Every run gets: fresh user/pid/net/ipc/uts/cgroup namespaces (``--unshare-net`` leaves only a
loopback device of its own, so no host or internet socket is reachable), a read-only view of
``/usr`` (and of the interpreter's prefix when it lives elsewhere) and nothing else of the host, a
read-only ``/dev`` with a size-capped ``/dev/shm``, one size-capped tmpfs at ``/sandbox`` as the only
other writable place (``/tmp`` points into it), a clean environment, a new session (its own process
group), and ``prlimit`` limits on CPU time, address space, file size, open files and
processes/threads. The program itself is handed to bubblewrap through a file descriptor
(``--ro-bind-data``), so no copy of it is ever left on the host's disk.

Kernel-side (:mod:`openconductor.sandbox_kernel`): where this machine allows it, each run gets its own
memory cgroup capped at ``memory_mb`` for everything it pins (processes, tmpfs pages, memfd, page
cache), and a seccomp filter that denies ``memfd_create`` and a few attack-surface system calls.
Where either is unavailable, one log line says so and why.

A wall-clock timeout kills the whole process group; bubblewrap's ``--die-with-parent`` and the pid
namespace take every descendant with it. When the caller is root, bubblewrap is started as an
unprivileged user (``sandbox_uid``, default ``nobody``): the kernel never applies ``RLIMIT_NPROC``
to root, so a fork bomb would otherwise be unbounded.

:func:`run_python_pair` runs two programs in two sandboxes joined only by two pipes; the code grader
uses it so a candidate program never shares a process with the tests that judge it.

If bubblewrap is missing or cannot create namespaces, :class:`SandboxUnavailable` is raised.
Nothing runs unsandboxed unless the caller sets ``SandboxSettings(allow_unsandboxed=True)``.

The settings and results live in :mod:`openconductor.sandbox_settings`, the probe and the command line of a run
in :mod:`openconductor.sandbox_plan`; this module runs programs and re-exports the public names.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional, Union

from .sandbox_plan import _Command, _command, _Plan, _plan_for, _plans, check_sandbox
from .sandbox_settings import (
    PairResult, SandboxError, SandboxLimits, SandboxResult, SandboxSettings, SandboxUnavailable, Status, load_sandbox_settings,
)

__all__ = [
    "SandboxError",
    "SandboxUnavailable",
    "SandboxLimits",
    "SandboxSettings",
    "SandboxResult",
    "PairResult",
    "load_sandbox_settings",
    "check_sandbox",
    "run_python",
    "run_python_sync",
    "run_python_pair",
]


# --------------------------------------------------------------------------------------- concurrency

# A thread-safe counter rather than an asyncio.Semaphore: graders run on several event loops
# (TRL's reward thread, asyncio.run in the sync wrapper), and the bound must hold across all of them.
_slots_lock = threading.Lock()
_slots_used = 0


async def _acquire_slot(limit: int) -> None:
    global _slots_used
    delay = 0.001
    while True:
        with _slots_lock:
            if _slots_used < limit:
                _slots_used += 1
                return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.02)


def _release_slot() -> None:
    global _slots_used
    with _slots_lock:
        _slots_used -= 1


# ------------------------------------------------------------------------------------------- running


async def _read_capped(stream: asyncio.StreamReader, cap: int, sink: list[bytes], dropped: list[bool]) -> None:
    """Keep the first ``cap`` bytes, drain (and drop) the rest; ``dropped[0]`` turns True as soon as
    anything is dropped (so a reader cancelled at a timeout still tells)."""
    kept = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        if kept < cap:
            sink.append(chunk[: cap - kept])
            dropped[0] = dropped[0] or len(chunk) > cap - kept
            kept += min(len(chunk), cap - kept)
        else:
            dropped[0] = True


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    try:
        if data:
            stdin.write(data)
            await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program exited without reading all of its input: not our error
    finally:
        try:
            stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass


def _classify(code: Optional[int], stderr: str, timed_out: bool, limits: SandboxLimits, oom_kills: int = 0) -> tuple[Status, str]:
    if timed_out:
        return "timeout", f"wall-clock limit of {limits.wall_s:g} s exceeded; process group killed"
    if oom_kills:
        return "memory", (
            f"memory limit of {limits.memory_mb} MiB for the whole run (processes, tmpfs, memfd) exceeded; "
            "the kernel's OOM killer ended a process"
        )
    if code == 0:
        return "ok", ""
    # bubblewrap reports a child killed by signal N as exit 128+N; asyncio reports -N when unsandboxed.
    sig = -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return "memory", f"memory limit of {limits.memory_mb} MiB (address space) exceeded"
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "CPU" in stderr):
        return "cpu_time", f"CPU-time limit of {limits.cpu_s} s exceeded"
    if sig is not None and sig in signal.valid_signals():
        name = signal.Signals(sig).name
        if sig == signal.SIGKILL:
            return "killed", f"killed by {name} (likely the CPU hard limit or memory)"
        if sig == signal.SIGSEGV:
            return "killed", f"crashed with {name} (a segfault; can also be the memory limit)"
        return "killed", f"killed by {name}"
    if "Resource temporarily unavailable" in stderr and ("fork" in stderr or "thread" in stderr):
        return "error", f"process/thread limit of {limits.processes} reached (exit code {code})"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return "error", f"exit code {code}" + (f": {last[:300]}" if last else "")


Stdio = Union[bytes, int]  # bytes: fed through a pipe by us; int: a file descriptor the process owns


async def _run(
    plan: _Plan,
    limits: SandboxLimits,
    code: str,
    args: list[str],
    *,
    stdin: Stdio = b"",
    stdout: Optional[int] = None,
    inherit: tuple[int, ...] = (),
    stop: Optional[asyncio.Event] = None,
) -> SandboxResult:
    """Start ``code`` and wait for it within ``limits``. ``stdin``/``stdout`` may be file descriptors
    (then the process uses them directly and ``result.stdout`` is empty); ``inherit``: further fds it
    gets as-is. Every fd given here is ours to close once the process has it. ``stop`` set: kill it."""
    command = _command_with_fds(plan, limits, code, args, stdin, stdout, inherit)
    proc = None
    try:
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=stdin if isinstance(stdin, int) else asyncio.subprocess.PIPE,
            stdout=stdout if stdout is not None else asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as a whole on timeout
            pass_fds=tuple(command.pass_fds),
            **command.kwargs,
        )
        command.close_fds()  # the child has them: a pipe's other end now sees EOF when the child dies
        ended = await _wait(proc, limits, stdin, stop, functools.partial(_kill_run, proc, command))
        return _result(plan, limits, command, proc, ended, time.perf_counter() - started)
    finally:
        if proc is not None and proc.returncode is None:  # cancelled while it ran: leave nothing behind
            _kill_run(proc, command)
            await proc.wait()
        command.close_fds()
        await asyncio.to_thread(command.cleanup)  # removing the cgroup may wait for the kernel to let go


def _command_with_fds(plan: _Plan, limits: SandboxLimits, code: str, args: list[str], stdin: Stdio, stdout: Optional[int],
                      inherit: tuple[int, ...]) -> "_Command":
    """The command, holding the fds the process gets (closed here if the command cannot be built)."""
    try:
        command = _command(plan, limits, code, args)
    except BaseException:
        for fd in [fd for fd in (stdin, stdout) if isinstance(fd, int)] + list(inherit):
            os.close(fd)
        raise
    for fd in (stdin, stdout):
        if isinstance(fd, int):
            command.give(fd, by_number=False)  # becomes its 0 / 1
    for fd in inherit:
        command.give(fd)
    return command


@dataclass
class _Ended:
    """How a process ended, and what it wrote (capped)."""

    out: list[bytes]
    err: list[bytes]
    truncated: bool
    timed_out: bool
    stopped: bool


async def _wait(proc: asyncio.subprocess.Process, limits: SandboxLimits, stdin: Stdio, stop: Optional[asyncio.Event],
                kill: Callable[[], None]) -> _Ended:
    """Feed and read the process until it exits, ``limits.wall_s`` passes or ``stop`` is set (then ``kill``
    ends the run: its process group and whatever else is in its cgroup)."""
    out: list[bytes] = []
    err: list[bytes] = []
    dropped = [False]
    readers = [asyncio.ensure_future(_read_capped(proc.stderr, min(limits.max_output_bytes, 65536), err, dropped))]
    if proc.stdout is not None:
        readers.append(asyncio.ensure_future(_read_capped(proc.stdout, limits.max_output_bytes, out, dropped)))
    feeder = [asyncio.ensure_future(_feed(proc.stdin, stdin))] if proc.stdin is not None else []
    finished = asyncio.ensure_future(asyncio.gather(proc.wait(), *readers, *feeder))
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    waiting = {finished} | ({stopper} if stopper else set())
    done, _ = await asyncio.wait(waiting, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
    stopped = finished not in done and stopper is not None and stopper in done
    timed_out = finished not in done and not stopped
    for task in (finished, stopper):
        if task is not None and not task.done():
            task.cancel()
    if proc.returncode is None or timed_out or stopped:
        kill()
    await proc.wait()
    for task in readers + feeder:
        if not task.done():
            task.cancel()
    await asyncio.gather(finished, *readers, *feeder, return_exceptions=True)
    return _Ended(out, err, dropped[0], timed_out, stopped)


def _kill_run(proc: asyncio.subprocess.Process, command: "_Command") -> None:
    _kill_group(proc)
    if command.cgroup is not None:  # a process bubblewrap left behind is still in the run's cgroup
        command.cgroup.kill()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _result(plan: _Plan, limits: SandboxLimits, command: "_Command", proc: asyncio.subprocess.Process, ended: _Ended, wall: float) -> SandboxResult:
    stderr_text = b"".join(ended.err).decode("utf-8", errors="replace")
    oom = command.cgroup.oom_kills() if command.cgroup else 0
    peak = command.cgroup.peak_bytes() if command.cgroup else None
    if ended.stopped:
        status, reason = "stopped", "stopped by the caller (the other program of the pair finished)"
    else:
        status, reason = _classify(None if ended.timed_out else proc.returncode, stderr_text, ended.timed_out, limits, oom)
    if not plan.sandboxed:
        reason = (reason + "; " if reason else "") + "ran UNSANDBOXED (allow_unsandboxed=True)"
    return SandboxResult(
        status=status,
        exit_code=None if ended.timed_out or ended.stopped else proc.returncode,
        stdout=b"".join(ended.out).decode("utf-8", errors="replace"),
        stderr=stderr_text,
        wall_s=round(wall, 4),
        reason=reason,
        truncated=ended.truncated,
        sandboxed=plan.sandboxed,
        peak_memory_mb=None if peak is None else round(peak / (1 << 20), 1),
    )


def _check_args(code: object, settings: Optional[SandboxSettings]) -> SandboxSettings:
    if not isinstance(code, str):
        raise SandboxError(f"code must be a str, got {type(code).__name__}")
    return settings or SandboxSettings()


async def _plan_async(settings: SandboxSettings) -> _Plan:
    return _plans.get(settings) or await asyncio.to_thread(_plan_for, settings)


async def run_python(
    code: str,
    stdin: str | bytes = b"",
    limits: Optional[SandboxLimits] = None,
    settings: Optional[SandboxSettings] = None,
    args: Optional[list[str]] = None,
) -> SandboxResult:
    """Run ``code`` as a Python program in the sandbox; never raises for the program's own failures.

    Raises SandboxUnavailable when no sandbox can be had (see INSTALL_HINT) and SandboxError for
    bad arguments.
    """
    settings = _check_args(code, settings)
    plan = await _plan_async(settings)
    data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
    await _acquire_slot(settings.max_concurrency)
    try:
        return await _run(plan, limits or SandboxLimits(), code, list(args or []), stdin=data)
    finally:
        _release_slot()


async def run_python_pair(
    driver: str,
    worker: str,
    *,
    driver_stdin: str | bytes = b"",
    limits: Optional[SandboxLimits] = None,
    worker_limits: Optional[SandboxLimits] = None,
    settings: Optional[SandboxSettings] = None,
) -> PairResult:
    """Run two programs in two sandboxes joined only by two pipes.

    The worker's stdin and stdout are the pipes; the driver gets their other ends as file descriptors
    ``int(sys.argv[1])`` (read what the worker writes) and ``int(sys.argv[2])`` (write to the worker).
    The worker cannot reach the driver's code, stdin, stdout or files. When the driver exits, the
    worker is stopped. The pair takes one concurrency slot: the two take turns.
    """
    settings = _check_args(driver, settings)
    _check_args(worker, settings)
    plan = await _plan_async(settings)
    limits = limits or SandboxLimits()
    data = driver_stdin.encode() if isinstance(driver_stdin, str) else bytes(driver_stdin)
    await _acquire_slot(settings.max_concurrency)
    try:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        stop = asyncio.Event()
        worker_run = asyncio.ensure_future(
            _run(plan, worker_limits or limits, worker, [], stdin=to_worker_r, stdout=from_worker_w, stop=stop)
        )
        try:
            driver_result = await _run(
                plan, limits, driver, [str(from_worker_r), str(to_worker_w)], stdin=data, inherit=(from_worker_r, to_worker_w)
            )
        finally:
            stop.set()
            worker_result = await worker_run
        return PairResult(driver_result, worker_result)
    finally:
        _release_slot()


_sync_runner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="oc-sandbox-sync")


def run_sync(coro):
    """Run a coroutine to completion from sync code, even when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _sync_runner.submit(asyncio.run, coro).result()


def run_python_sync(
    code: str,
    stdin: str | bytes = b"",
    limits: Optional[SandboxLimits] = None,
    settings: Optional[SandboxSettings] = None,
    args: Optional[list[str]] = None,
) -> SandboxResult:
    """Blocking wrapper of :func:`run_python`."""
    return run_sync(run_python(code, stdin=stdin, limits=limits, settings=settings, args=args))

