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
"""

from __future__ import annotations

import asyncio
import functools
import logging
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .sandbox_kernel import MemoryCgroups, RunCgroup, memory_cgroups, seccomp_program

log = logging.getLogger(__name__)

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
    memory_mb: int = Field(
        512, ge=32,
        description="memory of the whole run (processes, tmpfs, memfd, page cache) where a memory cgroup is "
        "available; always also RLIMIT_AS per process (virtual address space)",
    )  # fmt: skip
    file_size_mb: int = Field(16, ge=1, description="RLIMIT_FSIZE: largest file a process may write")
    disk_mb: int = Field(64, ge=1, description="size of the writable tmpfs at /sandbox")
    shm_mb: int = Field(16, ge=1, description="size of the tmpfs at /dev/shm (POSIX shared memory)")
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
    memory_cgroup: bool = Field(True, description="cap each run's total memory with a cgroup where one can be made")
    seccomp: bool = Field(True, description="deny memfd_create and attack-surface system calls (needs libseccomp)")


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


Status = Literal["ok", "error", "timeout", "cpu_time", "memory", "killed", "stopped"]


@dataclass
class SandboxResult:
    """What one run did. ``status`` is ``ok`` only for exit code 0 within every limit; ``stopped``: the
    caller ended it (the other program of a pair finished first)."""

    status: Status
    exit_code: Optional[int]
    stdout: str
    stderr: str
    wall_s: float
    reason: str = ""
    truncated: bool = False
    sandboxed: bool = True
    peak_memory_mb: Optional[float] = None  # the run's memory cgroup peak, where there is one

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class PairResult:
    """The two runs of :func:`run_python_pair`."""

    driver: SandboxResult
    worker: SandboxResult


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
    cgroups: Optional[MemoryCgroups] = None  # where each run's memory cgroup goes
    seccomp: Optional[bytes] = None  # BPF program for --seccomp
    sh: Optional[str] = None  # joins the run's cgroup before exec (needed with cgroups)
    setpriv: Optional[str] = None  # drops root to sandbox_uid (needed when run_as is set)
    notes: tuple[str, ...] = ()  # what this plan lacks, for check_sandbox


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


def _bwrap_argv(plan: _Plan, limits: SandboxLimits, code_fd: int, seccomp_fd: Optional[int]) -> list[str]:
    """bubblewrap + prlimit up to the interpreter; the program is read from ``code_fd`` into /code/main.py."""
    assert plan.bwrap and plan.prlimit
    sized = "--size" in plan.features  # bwrap >= 0.7; without it a tmpfs is half the RAM (the cgroup still caps it)
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
        *(["--size", str(limits.shm_mb << 20)] if sized else []), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",  # --dev is a writable tmpfs of half the RAM; only /dev/shm stays writable
        *(["--size", str(limits.disk_mb << 20)] if sized else []), "--tmpfs", "/sandbox",
        "--symlink", "sandbox", "/tmp",
        "--perms", "0444", "--ro-bind-data", str(code_fd), "/code/main.py",
        "--remount-ro", "/",
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
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
    return cmd


def _memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, positioned at its start (nothing touches the disk)."""
    fd = os.memfd_create(name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


@dataclass
class _Command:
    """A ready-to-start process: argv, the fds it inherits by number, its cgroup. ``owned``: every fd
    of ours it is given (also as stdin/stdout), closed once it has them."""

    argv: list[str]
    kwargs: dict
    pass_fds: list[int] = field(default_factory=list)
    owned: list[int] = field(default_factory=list)
    cgroup: Optional[RunCgroup] = None
    workdir: Optional[str] = None  # unsandboxed runs only: a private temp dir, removed after

    def give(self, fd: int, by_number: bool = True) -> None:
        self.owned.append(fd)
        if by_number:
            self.pass_fds.append(fd)

    def close_fds(self) -> None:
        for fd in self.owned:
            try:
                os.close(fd)
            except OSError:
                pass
        self.owned = []

    def cleanup(self) -> None:
        self.close_fds()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _command(plan: _Plan, limits: SandboxLimits, code: str, args: list[str]) -> _Command:
    """How to start ``code``: sandboxed (the program in a memfd), or, when opted in, unsandboxed."""
    interpreter = [plan.python, "-I", "-B", "-X", "utf8"]
    env = {"PATH": "/usr/bin:/bin"}
    if not plan.sandboxed:
        work = tempfile.mkdtemp(prefix="oc-unsandboxed-")  # mode 0700: never readable by other users
        main = Path(work, "main.py")
        main.write_text(code)
        kwargs = dict(
            env={**env, "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"},
            cwd=work, preexec_fn=_unsandboxed_preexec(limits),
        )  # fmt: skip
        return _Command(interpreter + [str(main), *args], kwargs, workdir=work)
    command = _Command([], dict(env=env, cwd="/"))
    try:
        code_fd = _memfd("oc-program", code.encode())
        command.give(code_fd)
        seccomp_fd = None
        if plan.seccomp is not None:
            seccomp_fd = _memfd("oc-seccomp", plan.seccomp)
            command.give(seccomp_fd)
        argv = _bwrap_argv(plan, limits, code_fd, seccomp_fd) + interpreter + ["/code/main.py", *args]
        if plan.run_as is not None:
            assert plan.setpriv
            uid = str(plan.run_as)
            argv = [plan.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]
        if plan.cgroups is not None:
            assert plan.sh
            command.cgroup = plan.cgroups.create(limits.memory_mb << 20)
            # Join the cgroup before anything else runs, so every descendant is charged to it.
            argv = [plan.sh, "-c", 'echo $$ > "$0" && exec "$@"', str(command.cgroup.procs), *argv]
    except BaseException:
        command.cleanup()
        raise
    command.argv = argv
    return command


def _probe(settings: SandboxSettings) -> _Plan:
    """Find a working launch plan by running ``print(6*7)`` through it."""
    import subprocess

    run_as = settings.sandbox_uid if os.geteuid() == 0 else None
    bwrap = shutil.which(settings.bwrap)
    prlimit = shutil.which("prlimit")
    setpriv = shutil.which("setpriv") if run_as is not None else None
    sh = shutil.which("sh")
    problems: list[str] = []
    if bwrap is None:
        problems.append(f"`{settings.bwrap}` is not on PATH")
    if prlimit is None:
        problems.append("`prlimit` (util-linux) is not on PATH")
    if run_as is not None and setpriv is None:
        problems.append("`setpriv` (util-linux) is not on PATH (needed to drop root)")
    candidates = _python_candidates(settings)
    if not candidates:
        problems.append("no Python interpreter found to run inside the sandbox (set SandboxSettings.python)")
    features: frozenset[str] = frozenset()
    if bwrap is not None:
        try:
            usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
            features = frozenset(f for f in ("--disable-userns", "--size") if f in usage)
        except (OSError, subprocess.SubprocessError) as exc:
            problems.append(f"`{bwrap} --help` failed: {exc}")
    if not problems:
        cgroups, seccomp, notes = _kernel_limits(settings, sh)
        for python in candidates:
            if run_as is not None and not _world_traversable(Path(os.path.realpath(python))):
                problems.append(f"{python} is not reachable by uid {run_as} (a parent directory is private)")
                continue
            plan = _Plan(True, bwrap, python, _binds_for(python, settings), run_as, prlimit, features,
                         cgroups, seccomp, sh, setpriv, notes)  # fmt: skip
            result = _run_blocking_probe(plan)
            if result is None:
                for note in notes:
                    log.warning("sandbox: %s", note)
                return plan
            problems.append(f"{python}: {result}")
    if settings.allow_unsandboxed:
        python = candidates[0] if candidates else sys.executable
        return _Plan(False, None, python, [], None, None, notes=("UNSANDBOXED (allow_unsandboxed=True)",))
    raise SandboxUnavailable("cannot sandbox generated code: " + "; ".join(problems) + ". " + INSTALL_HINT)


def _kernel_limits(settings: SandboxSettings, sh: Optional[str]) -> tuple[Optional[MemoryCgroups], Optional[bytes], tuple[str, ...]]:
    """The memory cgroups and seccomp program this machine allows, and a note for each one missing."""
    notes = []
    cgroups = None
    if settings.memory_cgroup:
        cgroups, why = memory_cgroups()
        if cgroups is None or sh is None:
            cgroups = None
            notes.append(
                f"no memory cgroup ({why if sh else '`sh` is not on PATH'}): memory is bounded per process "
                "(memory_mb of address space each) plus the /sandbox and /dev/shm tmpfs sizes, not per run"
            )
    seccomp = None
    if settings.seccomp:
        seccomp, why = seccomp_program()
        if seccomp is None:
            notes.append(f"no seccomp filter ({why}): memfd_create is bounded only by file size x open files")
    return cgroups, seccomp, tuple(notes)


def _run_blocking_probe(plan: _Plan) -> Optional[str]:
    import subprocess

    command = _command(plan, SandboxLimits(), "print(6*7)", [])
    try:
        proc = subprocess.run(command.argv, capture_output=True, timeout=30, pass_fds=command.pass_fds, **command.kwargs)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        command.cleanup()
    if proc.returncode != 0 or proc.stdout.strip() != b"42":
        return f"bubblewrap test run failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()[:300]}"
    return None


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
    kernel = [
        f"memory cgroup v{plan.cgroups.version} per run" if plan.cgroups else "no memory cgroup",
        "seccomp" if plan.seccomp else "no seccomp",
    ]
    return f"bubblewrap {plan.bwrap}{who}, interpreter {plan.python}, {', '.join(kernel)}"


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


def _unsandboxed_preexec(limits: SandboxLimits):
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


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
