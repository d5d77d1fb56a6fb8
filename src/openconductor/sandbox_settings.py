"""The sandbox's settings and results: ``SandboxLimits`` / ``SandboxSettings`` (a pool file's ``[sandbox]`` table),
the errors, and what a run returns (``SandboxResult``, ``PairResult``). ``openconductor.sandbox`` re-exports them."""

from __future__ import annotations

import logging
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


log = logging.getLogger(__name__)

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

