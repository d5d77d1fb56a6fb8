"""Kernel-side limits for sandboxed runs: a memory cgroup per run and a seccomp filter.

A memory cgroup bounds everything a run pins: all its processes, the pages of its tmpfs mounts,
``memfd`` files and page cache. RLIMIT_AS cannot (it is per process and ignores tmpfs and memfd
pages that are written but not mapped). Where to put one, tried in order:

* cgroup v2 with the memory controller usable below this process's cgroup (the root of a container's
  cgroup namespace, or a delegated subtree),
* cgroup v1's memory hierarchy as root (each run gets a child of this process's memory cgroup).

Where neither works (an unprivileged user without delegation), :func:`memory_cgroups` says why and
runs stay bounded per process (RLIMIT_AS) plus the fixed tmpfs sizes.

The seccomp filter (compiled with libseccomp through ``pyseccomp``) makes a few system calls fail with
EPERM: ``memfd_create``/``memfd_secret`` (memory outside the address-space limit) and calls a test
program never needs that widen the kernel's attack surface (io_uring, bpf, userfaultfd, ptrace, ...).
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["MemoryCgroups", "RunCgroup", "memory_cgroups", "seccomp_program", "DENIED_SYSCALLS"]

CGROUP_ROOT = Path("/sys/fs/cgroup")

# Denied with EPERM inside the sandbox, and why.
DENIED_SYSCALLS = {
    "memfd_create": "anonymous files pin memory outside RLIMIT_AS",
    "memfd_secret": "unswappable secret memory outside RLIMIT_AS",
    "userfaultfd": "stalls the kernel on page faults; a classic exploit primitive",
    "io_uring_setup": "io_uring: a large kernel attack surface no test needs",
    "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring",
    "bpf": "loading BPF programs",
    "perf_event_open": "performance counters: side channels, kernel attack surface",
    "keyctl": "the kernel keyring is not namespaced",
    "add_key": "the kernel keyring",
    "request_key": "the kernel keyring",
    "ptrace": "tracing other processes",
    "process_vm_readv": "reading another process's memory",
    "process_vm_writev": "writing another process's memory",
}


@dataclass
class RunCgroup:
    """One run's memory cgroup: join it by writing a pid to ``procs``; read its peak and OOM kills."""

    path: Path
    version: int

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def peak_bytes(self) -> Optional[int]:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            found = re.search(r"^oom_kill (\d+)", (self.path / name).read_text(), re.M)
        except OSError:
            return 0
        return int(found.group(1)) if found else 0

    def kill(self) -> None:
        """SIGKILL every process in the run. Needed when a process outlives bubblewrap: killed while it was
        still setting up, bubblewrap never armed ``--die-with-parent`` for its child, which then kept the
        run's pipes open (asyncio's ``Process.wait`` waits for them) until it ended by itself."""
        if self.version == 2:
            try:
                (self.path / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass  # before Linux 5.14: no cgroup.kill
        for _ in range(5):  # cgroup v1 (or v2 before Linux 5.14): one by one, until none is left
            try:
                pids = [int(line) for line in self.procs.read_text().split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        # The run's processes are gone, but the kernel may still be tearing them down: retry briefly.
        for delay in (0, 0.005, 0.02, 0.1, 0.3):
            time.sleep(delay)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return


@dataclass
class MemoryCgroups:
    """Where per-run memory cgroups are created (``parent``), and how (cgroup v1 or v2)."""

    parent: Path
    version: int
    _counter = itertools.count()

    def create(self, limit_bytes: int, owner: Optional[int] = None) -> RunCgroup:
        """A new cgroup capped at ``limit_bytes`` (no swap). ``owner``: a uid that must be able to join it."""
        path = self.parent / f"oc-run-{os.getpid()}-{next(self._counter)}"
        path.mkdir()
        try:
            if self.version == 2:
                (path / "memory.max").write_text(str(limit_bytes))
                _write_if_present(path / "memory.swap.max", "0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                _write_if_present(path / "memory.memsw.limit_in_bytes", str(limit_bytes))
            if owner is not None and self.version == 1:
                os.chown(path / "cgroup.procs", owner, -1)  # v1: joining needs only the file's permission
        except OSError:
            path.rmdir()
            raise
        return RunCgroup(path, self.version)


def _write_if_present(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        pass


def _own_cgroup(version: int, controller: str = "memory") -> Optional[str]:
    """This process's cgroup path in the v2 hierarchy or in the v1 hierarchy of ``controller``."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or (version == 1 and controller in controllers.split(",")):
            return path
    return None


def _try_parent(parent: Path, version: int) -> Optional[str]:
    """None if a capped child cgroup can be made under ``parent``, else why not."""
    probe = parent / f"oc-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"cannot create a cgroup in {parent}: {exc.strerror}"
    try:
        limit_file = "memory.max" if version == 2 else "memory.limit_in_bytes"
        if version == 2 and not (probe / limit_file).exists():
            try:  # enable the controller for children: allowed at a (namespace) root or a process-free cgroup
                (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError as exc:
                return f"the memory controller is not delegated to {parent} ({exc.strerror})"
            probe.rmdir()
            probe.mkdir()
        (probe / limit_file).write_text(str(64 << 20))
        return None
    except OSError as exc:
        return f"cannot set a memory limit in {parent}: {exc.strerror}"
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


def memory_cgroups() -> tuple[Optional[MemoryCgroups], str]:
    """Where per-run memory cgroups can be made here, or None and why not (for one log line)."""
    reasons = []
    for version, mount in ((2, CGROUP_ROOT), (1, CGROUP_ROOT / "memory")):
        controllers = mount / "cgroup.controllers"
        if (version == 2 and not controllers.exists()) or (version == 1 and not mount.is_dir()):
            continue
        if version == 2 and "memory" not in controllers.read_text().split():
            reasons.append("cgroup v2 without the memory controller")
            continue
        parent = mount / (_own_cgroup(version) or "/").lstrip("/")
        why = _try_parent(parent, version)
        if why is None:
            return MemoryCgroups(parent, version), f"cgroup v{version} memory controller below {parent}"
        reasons.append(why)
    return None, "; ".join(reasons) or f"no cgroup filesystem at {CGROUP_ROOT}"


def seccomp_program() -> tuple[Optional[bytes], str]:
    """The compiled BPF program for bubblewrap's ``--seccomp FD``, or None and why not."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 missing
        return None, f"pyseccomp/libseccomp unavailable ({exc}); install libseccomp2 and `pip install pyseccomp`"
    try:
        flt = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                flt.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (ValueError, OSError):
                continue  # a system call this libseccomp version does not know
        with tempfile.TemporaryFile() as fh:
            flt.export_bpf(fh)
            fh.seek(0)
            program = fh.read()
    except Exception as exc:  # libseccomp refused: run without the filter, say so
        return None, f"libseccomp could not build the filter: {exc}"
    return program, f"seccomp denies {len(DENIED_SYSCALLS)} system calls"
