"""Run untrusted Python (LLM-written code) in a bubblewrap sandbox with hard resource limits.

Every run gets: fresh user/pid/net/ipc/uts/cgroup namespaces (``--unshare-net`` leaves only a
loopback device of its own, so no host or internet socket is reachable), a read-only view of
``/usr`` (and of the interpreter's prefix when it lives elsewhere) and nothing else of the host, one
size-capped tmpfs at ``/sandbox`` as the only writable place (``/tmp`` points into it), a clean
environment, a new session (its own process group), and ``prlimit`` limits on CPU time, address
space, file size, open files and processes/threads. A wall-clock timeout kills the whole process
group; bubblewrap's ``--die-with-parent`` and the pid namespace take every descendant with it.

When the caller is root, bubblewrap is started as an unprivileged user (``sandbox_uid``, default
``nobody``): the kernel never applies ``RLIMIT_NPROC`` to root, so a fork bomb would otherwise be
unbounded.

If bubblewrap is missing or cannot create namespaces, :class:`SandboxUnavailable` is raised.
Nothing runs unsandboxed unless the caller sets ``SandboxSettings(allow_unsandboxed=True)``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SandboxError",
    "SandboxUnavailable",
    "SandboxLimits",
    "SandboxSettings",
    "SandboxResult",
    "load_sandbox_settings",
    "check_sandbox",
    "run_python",
    "run_python_sync",
]

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install -y bubblewrap`; Fedora: `dnf install bubblewrap`) "
    "and make sure unprivileged user namespaces are enabled (`sysctl kernel.unprivileged_userns_clone=1`, "
    "or on Ubuntu 24.04+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0`). To run generated code "
    "WITHOUT isolation anyway (only on a throwaway machine), set SandboxSettings(allow_unsandboxed=True)."
)


class SandboxError(Exception):
    """Bad sandbox input or configuration."""


class SandboxUnavailable(SandboxError):
    """bubblewrap is missing or unusable here; the message says how to fix it."""


# ----------------------------------------------------------------------------------------- settings


class SandboxLimits(BaseModel):
    """Per-run resource limits. Defaults fit a HumanEval / LiveCodeBench test."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(10.0, gt=0, description="wall-clock limit; the process group is killed after it")
    cpu_s: int = Field(5, ge=1, description="RLIMIT_CPU per process: SIGXCPU after this many CPU seconds")
    memory_mb: int = Field(512, ge=32, description="RLIMIT_AS per process (virtual address space)")
    file_size_mb: int = Field(16, ge=1, description="RLIMIT_FSIZE: largest file a process may write")
    disk_mb: int = Field(64, ge=1, description="size of the writable tmpfs at /sandbox")
    processes: int = Field(16, ge=2, description="RLIMIT_NPROC: processes + threads inside the sandbox")
    open_files: int = Field(64, ge=16, description="RLIMIT_NOFILE")
    max_output_bytes: int = Field(1 << 20, ge=1024, description="stdout/stderr kept per stream; the rest is dropped")


class SandboxSettings(BaseModel):
    """How to sandbox; usually loaded from a ``[sandbox]`` table in a TOML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Optional[str] = Field(
        None, description="interpreter run inside; default: this interpreter's base, else /usr/bin/python3"
    )
    bwrap: str = "bwrap"
    sandbox_uid: int = Field(65534, description="uid (and gid) the sandbox runs as when the caller is root")
    max_concurrency: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), ge=1)
    allow_unsandboxed: bool = Field(
        False,
        description="DANGEROUS: if bubblewrap is unusable, run with rlimits/clean env only instead of raising",
    )
    extra_ro_binds: tuple[str, ...] = Field((), description="host paths to expose read-only")


def load_sandbox_settings(path: str | Path) -> SandboxSettings:
    """Read ``[sandbox]`` (settings) and ``[sandbox.limits]`` is not used here: limits are per call."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise SandboxError(f"sandbox settings file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SandboxError(f"sandbox settings file {path} is not valid TOML: {exc}") from exc
    table = data.get("sandbox", data)
    try:
        return SandboxSettings.model_validate(table)
    except Exception as exc:  # pydantic ValidationError: name the file
        raise SandboxError(f"invalid [sandbox] settings in {path}: {exc}") from exc


Status = Literal["ok", "error", "timeout", "cpu_time", "memory", "killed"]


@dataclass
class SandboxResult:
    """What one run did. ``status`` is ``ok`` only for exit code 0 within every limit."""

    status: Status
    exit_code: Optional[int]
    stdout: str
    stderr: str
    wall_s: float
    reason: str = ""
    truncated: bool = False
    sandboxed: bool = True

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ------------------------------------------------------------------------------------------- probing


@dataclass
class _Plan:
    """The resolved way to launch: checked once per settings object."""

    sandboxed: bool
    bwrap: Optional[str]
    python: str
    binds: list[str]
    run_as: Optional[int]  # uid to switch to before bwrap (only when we are root)
    prlimit: Optional[str]
    features: frozenset[str] = frozenset()  # optional bwrap flags this version has (--disable-userns, --size)


_plans: dict[SandboxSettings, _Plan] = {}
_plans_lock = threading.Lock()


def _world_traversable(path: Path) -> bool:
    """Can an unprivileged uid reach ``path`` (every parent o+x, the file o+r or o+x)?"""
    try:
        for parent in list(path.parents)[::-1]:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        return bool(os.stat(path).st_mode & (stat.S_IROTH | stat.S_IXOTH))
    except OSError:
        return False


def _python_candidates(settings: SandboxSettings) -> list[str]:
    if settings.python:
        return [settings.python]
    found = [getattr(sys, "_base_executable", None) or sys.executable, "/usr/bin/python3"]
    return [p for p in dict.fromkeys(found) if p and os.path.exists(p)]


def _binds_for(python: str, settings: SandboxSettings) -> list[str]:
    """Read-only host paths the interpreter needs beyond /usr: its installation prefix."""
    real = Path(os.path.realpath(python))
    binds: list[str] = []
    if not str(real).startswith("/usr/"):
        binds.append(str(real.parent.parent))  # <prefix>/bin/python3 -> <prefix>
    binds.extend(settings.extra_ro_binds)
    return binds


def _bwrap_argv(plan: _Plan, limits: SandboxLimits, code_dir: str, argv: list[str]) -> list[str]:
    assert plan.bwrap and plan.prlimit
    cmd = [
        plan.bwrap,
        "--unshare-all", "--unshare-user",
        *(["--disable-userns"] if "--disable-userns" in plan.features else []),  # no nested namespaces (bwrap >= 0.8)
        "--die-with-parent", "--new-session", "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
    ]  # fmt: skip
    for path in plan.binds:
        cmd += ["--ro-bind", path, path]
    cmd += [
        "--proc", "/proc", "--dev", "/dev",
        *(["--size", str(limits.disk_mb << 20)] if "--size" in plan.features else []),  # bwrap >= 0.7
        "--tmpfs", "/sandbox",
        "--symlink", "sandbox", "/tmp",
        "--ro-bind", code_dir, "/code",
        "--remount-ro", "/",
        "--chdir", "/sandbox",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/sandbox",
        "--setenv", "TMPDIR", "/sandbox", "--setenv", "LANG", "C.UTF-8",
        "--",
        plan.prlimit,
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",  # soft: SIGXCPU, hard: SIGKILL a second later
        f"--as={limits.memory_mb << 20}",
        f"--fsize={limits.file_size_mb << 20}",
        f"--nproc={limits.processes}",  # set inside the new user namespace: counts only this sandbox
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]  # fmt: skip
    return cmd + argv


def _probe(settings: SandboxSettings) -> _Plan:
    """Find a working launch plan by running ``print(1)`` through it."""
    run_as = settings.sandbox_uid if os.geteuid() == 0 else None
    bwrap = shutil.which(settings.bwrap)
    prlimit = shutil.which("prlimit")
    problems: list[str] = []
    if bwrap is None:
        problems.append(f"`{settings.bwrap}` is not on PATH")
    if prlimit is None:
        problems.append("`prlimit` (util-linux) is not on PATH")
    candidates = _python_candidates(settings)
    if not candidates:
        problems.append("no Python interpreter found to run inside the sandbox (set SandboxSettings.python)")
    features: frozenset[str] = frozenset()
    if bwrap is not None:
        import subprocess

        try:
            usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
            features = frozenset(f for f in ("--disable-userns", "--size") if f in usage)
        except (OSError, subprocess.SubprocessError) as exc:
            problems.append(f"`{bwrap} --help` failed: {exc}")
    if not problems:
        for python in candidates:
            if run_as is not None and not _world_traversable(Path(os.path.realpath(python))):
                problems.append(f"{python} is not reachable by uid {run_as} (a parent directory is private)")
                continue
            plan = _Plan(True, bwrap, python, _binds_for(python, settings), run_as, prlimit, features)
            result = _run_blocking_probe(plan)
            if result is None:
                return plan
            problems.append(f"{python}: {result}")
    if settings.allow_unsandboxed:
        python = candidates[0] if candidates else sys.executable
        return _Plan(False, None, python, [], None, None)
    raise SandboxUnavailable("cannot sandbox generated code: " + "; ".join(problems) + ". " + INSTALL_HINT)


def _run_blocking_probe(plan: _Plan) -> Optional[str]:
    import subprocess

    code_dir = tempfile.mkdtemp(prefix="oc-probe-")
    try:
        os.chmod(code_dir, 0o755)
        argv = _bwrap_argv(plan, SandboxLimits(), code_dir, [plan.python, "-I", "-c", "print(6*7)"])
        try:
            proc = subprocess.run(
                argv, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
                user=plan.run_as, group=plan.run_as, extra_groups=[] if plan.run_as is not None else None,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != b"42":
            return f"bubblewrap test run failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()[:300]}"
        return None
    finally:
        shutil.rmtree(code_dir, ignore_errors=True)


def _plan_for(settings: SandboxSettings) -> _Plan:
    with _plans_lock:
        plan = _plans.get(settings)
        if plan is None:
            plan = _plans[settings] = _probe(settings)
        return plan


def check_sandbox(settings: Optional[SandboxSettings] = None) -> str:
    """Raise SandboxUnavailable unless sandboxing works; return a one-line description."""
    plan = _plan_for(settings or SandboxSettings())
    if not plan.sandboxed:
        return f"UNSANDBOXED (allow_unsandboxed=True): {plan.python} with rlimits only"
    who = f" as uid {plan.run_as}" if plan.run_as is not None else ""
    return f"bubblewrap {plan.bwrap}{who}, interpreter {plan.python}"


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


async def _read_capped(stream: asyncio.StreamReader, cap: int, sink: list[bytes]) -> bool:
    """Keep the first ``cap`` bytes, drain (and drop) the rest; True if anything was dropped."""
    kept = 0
    dropped = False
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return dropped
        if kept < cap:
            sink.append(chunk[: cap - kept])
            dropped = dropped or len(chunk) > cap - kept
            kept += min(len(chunk), cap - kept)
        else:
            dropped = True


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


def _unsandboxed_preexec(limits: SandboxLimits):
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _classify(code: Optional[int], stderr: str, timed_out: bool, limits: SandboxLimits) -> tuple[Status, str]:
    if timed_out:
        return "timeout", f"wall-clock limit of {limits.wall_s:g} s exceeded; process group killed"
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
    if not isinstance(code, str):
        raise SandboxError(f"code must be a str, got {type(code).__name__}")
    limits = limits or SandboxLimits()
    settings = settings or SandboxSettings()
    plan = _plans.get(settings) or await asyncio.to_thread(_plan_for, settings)
    data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)

    await _acquire_slot(settings.max_concurrency)
    code_dir = None
    try:
        code_dir = tempfile.mkdtemp(prefix="oc-sandbox-")
        os.chmod(code_dir, 0o755)  # readable by the unprivileged sandbox uid; never writable by it
        main = Path(code_dir, "main.py")
        main.write_text(code)
        os.chmod(main, 0o644)
        interpreter = [plan.python, "-I", "-B", "-X", "utf8"]
        if plan.sandboxed:
            argv = _bwrap_argv(plan, limits, code_dir, interpreter + ["/code/main.py", *(args or [])])
            kwargs: dict = dict(env={"PATH": "/usr/bin:/bin"}, cwd="/")
            if plan.run_as is not None:
                kwargs.update(user=plan.run_as, group=plan.run_as, extra_groups=[])
        else:
            work = tempfile.mkdtemp(prefix="oc-unsandboxed-")
            argv = interpreter + [str(main), *(args or [])]
            kwargs = dict(
                env={"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"},
                cwd=work, preexec_fn=_unsandboxed_preexec(limits),
            )  # fmt: skip
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as a whole on timeout
            **kwargs,
        )
        out: list[bytes] = []
        err: list[bytes] = []
        tasks = [
            asyncio.ensure_future(_read_capped(proc.stdout, limits.max_output_bytes, out)),
            asyncio.ensure_future(_read_capped(proc.stderr, min(limits.max_output_bytes, 65536), err)),
            asyncio.ensure_future(_feed(proc.stdin, data)),
        ]
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.gather(proc.wait(), *tasks), timeout=limits.wall_s)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            if proc.returncode is None or timed_out:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            await proc.wait()
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        wall = time.perf_counter() - started
        truncated = any(t.result() is True for t in tasks[:2] if t.done() and not t.cancelled())
        stdout = b"".join(out).decode("utf-8", errors="replace")
        stderr = b"".join(err).decode("utf-8", errors="replace")
        status, reason = _classify(None if timed_out else proc.returncode, stderr, timed_out, limits)
        if not plan.sandboxed:
            reason = (reason + "; " if reason else "") + "ran UNSANDBOXED (allow_unsandboxed=True)"
            shutil.rmtree(kwargs["cwd"], ignore_errors=True)
        return SandboxResult(
            status=status,
            exit_code=None if timed_out else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            wall_s=round(wall, 4),
            reason=reason,
            truncated=truncated,
            sandboxed=plan.sandboxed,
        )
    finally:
        if code_dir is not None:
            shutil.rmtree(code_dir, ignore_errors=True)
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
