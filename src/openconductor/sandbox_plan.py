"""How a sandboxed run is launched: the plan probed once per settings (bubblewrap, interpreter, binds, the kernel's
memory cgroup and seccomp filter) and the command line of one run. ``openconductor.sandbox`` runs what it builds."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


from .sandbox_kernel import MemoryCgroups, RunCgroup, memory_cgroups, seccomp_program

log = logging.getLogger("openconductor.sandbox")  # one logger for the sandbox, as before its split

from .sandbox_settings import INSTALL_HINT, SandboxLimits, SandboxSettings, SandboxUnavailable



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


def _unsandboxed_preexec(limits: SandboxLimits):
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb << 20,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


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

