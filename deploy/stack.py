"""A whole deployment on one machine, as child processes: PostgreSQL (the shared trace store), Redis (the
shared counters), several ``conductor serve`` replicas (each with its own worker processes) and, when
nginx is installed, nginx in front of them. ``local_stack.py`` beside it runs it; the scale-out tests
(``tests/test_scale.py``) start the same services with these functions. Not part of the package: a
development tool next to the deployment files.

PostgreSQL refuses to run as root: when this runs as root, the database and Redis run as ``nobody``.
Both listen on 127.0.0.1 only and trust local connections; that is a development stack (the compose
file in ``deploy/`` is the shape of a real one, with passwords).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import httpx


class ServiceUnavailable(RuntimeError):
    """A binary the service needs is not installed; the message says which package provides it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin(name: str) -> Optional[str]:
    """A PostgreSQL server binary (Debian keeps them out of PATH, in /usr/lib/postgresql/<version>/bin)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return found[-1] if found else shutil.which(name)


def _unprivileged(path: Path) -> dict:
    """Popen arguments that drop root to nobody (PostgreSQL refuses root), owning ``path``; {} otherwise."""
    if os.geteuid() != 0:
        return {}
    import grp
    import pwd

    for parent in path.resolve().parents:  # nobody must be able to reach it
        if parent.stat().st_mode & 0o001 == 0:
            raise RuntimeError(f"{parent} is not searchable by other users; put the stack in a directory like /tmp/<name>")
    user = pwd.getpwnam("nobody")
    group = grp.getgrgid(user.pw_gid).gr_name
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, user.pw_uid, user.pw_gid)
    return {"user": user.pw_uid, "group": group, "extra_groups": []}


def _wait(check, what: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready in {seconds:g}s")


@dataclass
class Stack:
    """Started services; ``close`` stops them in reverse order (SIGTERM, then SIGKILL)."""

    directory: Path
    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)

    def _spawn(self, name: str, args: list[str], **kwargs) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "ab")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)
        self.processes.append((name, proc))
        return proc

    # ---------------------------------------------------------------------------------- services

    def postgres(self, *, durable: bool = True) -> str:
        initdb, server = postgres_bin("initdb"), postgres_bin("postgres")
        if not initdb or not server:
            raise ServiceUnavailable("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        home = self.directory / "postgres"
        data, sockets = home / "data", home / "sockets"
        sockets.mkdir(parents=True, exist_ok=True)
        fresh = not data.exists()
        data.mkdir(mode=0o700, exist_ok=True)
        drop = _unprivileged(home)
        if fresh:
            subprocess.run([initdb, "-D", str(data), "-U", "conductor", "--auth=trust", "-E", "UTF8", "--locale=C"],
                           check=True, capture_output=True, **drop)
        port = free_port()
        args = [server, "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(sockets), "-c", "max_connections=200"]
        if not durable:  # tests: nothing to keep after a crash
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        proc = self._spawn("postgres", args, **drop)
        url = f"postgresql://conductor@127.0.0.1:{port}/postgres"

        def ready() -> bool:
            import psycopg

            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True

        _wait(ready, "postgres", proc)
        self.urls["postgres"] = url
        return url

    def redis(self) -> str:
        binary = shutil.which("redis-server")
        if not binary:
            raise ServiceUnavailable("Redis is not installed (Debian: apt-get install redis-server)")
        work = self.directory / "redis"
        work.mkdir(parents=True, exist_ok=True)
        port = free_port()
        proc = self._spawn("redis", [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                     "--dir", str(work), "--protected-mode", "yes"], **_unprivileged(work))
        url = f"redis://127.0.0.1:{port}/0"

        def ready() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")

        _wait(ready, "redis", proc)
        self.urls["redis"] = url
        return url

    def server(self, config: Path, *, name: str = "replica", port: Optional[int] = None, workers: int = 1,
               traces: Optional[str] = None, counters: Optional[str] = None, env: Optional[dict] = None) -> str:
        port = port or free_port()
        args = [sys.executable, "-m", "openconductor", "serve", "--config", str(config), "--port", str(port), "--workers", str(workers),
                "--log-level", "warning"]
        args += ["--traces", traces] if traces else []
        args += ["--counters", counters] if counters else []
        proc = self._spawn(name, args, env={**os.environ, **(env or {})})
        url = f"http://127.0.0.1:{port}"
        # Each process imports the server (~2 s of CPU); on a loaded 2-core machine that takes minutes.
        _wait(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, name, proc, seconds=300)
        self.urls[name] = url
        return url

    def nginx(self, upstreams: list[str], port: Optional[int] = None) -> str:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if not binary:
            raise ServiceUnavailable("nginx is not installed (Debian: apt-get install nginx)")
        work = self.directory / "nginx"
        work.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        servers = "\n".join(f"    server {u.removeprefix('http://')};" for u in upstreams)
        (work / "nginx.conf").write_text(f"""
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {work}/body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  upstream conductor {{
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 2m;
    location / {{
      proxy_pass http://conductor;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_buffering off;          # streams (SSE) pass through as they are written
      proxy_read_timeout 600s;
    }}
  }}
}}
""")
        proc = self._spawn("nginx", [binary, "-p", str(work), "-c", str(work / "nginx.conf"), "-g", "daemon off;"])
        url = f"http://127.0.0.1:{port}"
        _wait(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, "nginx", proc)
        self.urls["nginx"] = url
        return url

    # ------------------------------------------------------------------------------------ control

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill a service and its children at once (a crash, for the tests)."""
        for n, proc in self.processes:
            if n == name and proc.poll() is None:
                for child in _children(proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, sig)
                proc.send_signal(sig)
                proc.wait(timeout=30)

    def close(self) -> None:
        for name, proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
        self.processes.clear()

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
