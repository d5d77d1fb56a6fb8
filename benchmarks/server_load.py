"""Load on `conductor serve` in front of SIMULATED workers reached over loopback HTTP, side by side
with a bare FastAPI pass-through (the floor) and with two server processes, in one run.

Processes on 127.0.0.1: a simulated OpenAI-compatible upstream with a fixed latency
(openconductor.server.simulated_upstream), the target server, and this load generator (raw HTTP/1.1
keep-alive, several processes). Targets, one after the other against the same upstream:

- floor: benchmarks/passthrough_app.py, FastAPI forwarding each body to the upstream with the same
  HTTP client (aiohttp) the server's openai provider uses;
- conductor: `python -m openconductor serve`, whose preset runs the fixed "single" policy (one step) on
  one worker using provider "openai" with base_url on the upstream: the workflow's critical path is one
  upstream call of --latency seconds, and "overhead" is each request's latency minus that;
- conductor-2p: the same with `--workers 2` (two processes sharing the port).

    PYTHONPATH=src python benchmarks/server_load.py --concurrency 100 1000
    PYTHONPATH=src python benchmarks/server_load.py --targets conductor --concurrency 300 --profile 25

"server CPU ms/req" is the target's processes' CPU time (user + system, children included) per request
handled. Numbers are for simulated workers and depend on the machine and its load: the script prints
the load average, and the ratios between targets measured in the same run are what to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, seconds: float = 300) -> None:  # a loaded 2-core machine starts slowly
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {seconds:g}s")


def write_config(directory: Path, upstream: str, steps: int) -> Path:
    import hashlib

    (directory / "pool.toml").write_text(f"""
name = "simulated-http"
[[workers]]
name = "sim-http"
provider = "openai"
model = "sim"
base_url = "{upstream}/v1"
concurrency = 4000
max_retries = 0
timeout_s = 120
max_tokens = 16
[limits]
max_calls = {steps}
max_depth = 0
""")
    policy = "single" if steps == 1 else "self-reflection"
    options = "" if steps == 1 else f"policy_options = {{ rounds = {steps - 1} }}\n"
    path = directory / "server.toml"
    path.write_text(f"""
[server]
traces = "{directory / 'traces.sqlite3'}"
[[keys]]
name = "bench"
sha256 = "{hashlib.sha256(KEY.encode()).hexdigest()}"
max_concurrent = 100000
requests_per_minute = 10000000
burst = 100000
[models.bench]
version = "1"
pool = "pool.toml"
policy = "{policy}"
{options}""")
    return path


class RawHTTP:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams, for the load generator only: it costs far
    less CPU per request than httpx, so on a small machine the generator does not starve the server."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: Optional[asyncio.StreamReader] = None
        self.writer: Optional[asyncio.StreamWriter] = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None or self.reader is None or self.reader.at_eof():
            await self.close()
            await self.connect()  # the server closed an idle keep-alive connection: open a new one
        assert self.reader is not None and self.writer is not None
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append((await self.reader.readexactly(size + 2))[:-2])
            data = b"".join(parts)
        else:
            data = await self.reader.read()
            await self.close()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, data


async def one(conn: "RawHTTP", i: int, stream: bool) -> tuple[float, str]:
    body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": f"load request {i}"}], "stream": stream}).encode()
    start = time.perf_counter()
    try:
        status, data = await conn.post("/v1/chat/completions", body)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        await conn.close()
        return time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - start
    if status != 200:
        return elapsed, f"HTTP {status}: {data[:400].decode(errors='replace')}"
    if stream:
        events = [line for line in data.decode().split("\n") if line.startswith("data: ")]
        if not events or events[-1] != "data: [DONE]" or events[-2].startswith('data: {"error"'):
            return elapsed, f"stream ended badly: {events[-2:]!r}"
    elif b'"chat.completion"' not in data:
        return elapsed, f"not a chat completion: {data[:200]!r}"
    return elapsed, ""


async def wave(url: str, n: int, first: int, stream: bool, mode: str, duration: float, ramp: float, start_at: float) -> dict:
    """burst: n requests sent at once. sustained: n clients each sending back to back (closed loop) for
    ``duration`` seconds after starting at random offsets within ``ramp`` seconds; all are counted."""
    host, port = url.removeprefix("http://").split(":")
    conns = [RawHTTP(host, int(port)) for _ in range(n)]  # one keep-alive connection per concurrent client
    await asyncio.gather(*(c.connect() for c in conns))
    try:
        await asyncio.gather(*(one(conns[k], -k, False) for k in range(min(n, 20))))  # warm up
        await asyncio.sleep(max(0.0, start_at - time.time()))  # every client process starts together
        cpu = time.process_time()
        start = time.perf_counter()
        if mode == "burst":
            results = await asyncio.gather(*(one(conns[i], first + i, stream) for i in range(n)))
        else:
            rng = random.Random(first)
            stop = start + ramp + duration

            async def user(u: int) -> list[tuple[float, str]]:
                await asyncio.sleep(rng.uniform(0, ramp))
                done = []
                while time.perf_counter() < stop and len(done) < 100_000:  # bounded
                    done.append(await one(conns[u - first], u, stream))
                return done

            results = [r for batch in await asyncio.gather(*(user(first + u) for u in range(n))) for r in batch]
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    return {"wall_s": wall, "results": results, "client_cpu_s": cpu, "warmup": min(n, 20)}


def client_process(job: dict) -> dict:
    if job["cpus"]:
        os.sched_setaffinity(0, job["cpus"])
    return asyncio.run(wave(job["url"], job["n"], job["first"], job["stream"], job["mode"], job["duration"], job["ramp"], job["start_at"]))


def load(url: str, n: int, procs: int, cpus: Optional[set[int]], **options) -> dict:
    """Split n concurrent requests/clients over ``procs`` load-generator processes (one event loop
    each), so the generator does not become the bottleneck."""
    import multiprocessing

    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    start_at = time.time() + 2.0 + 0.002 * n
    jobs = [{"url": url, "n": k, "first": sum(shares[:i]), "cpus": cpus, "start_at": start_at, **options} for i, k in enumerate(shares) if k]
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        parts = pool.map(client_process, jobs)
    results = [r for part in parts for r in part["results"]]
    return {"wall_s": max(p["wall_s"] for p in parts), "latencies": sorted(t for t, e in results if not e),
            "errors": [e for _, e in results if e], "requests": len(results), "warmup": sum(p["warmup"] for p in parts),
            "client_cpu_s": sum(p["client_cpu_s"] for p in parts)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children (Linux /proc): the server's cost, not the machine's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    try:
        children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    except OSError:
        children = []
    return own + sum(cpu_seconds(c) for c in children if Path(f"/proc/{c}").exists())


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


PROFILED = """
import cProfile, sys, time
out = sys.argv.pop(1)
profile = cProfile.Profile(time.process_time)
from openconductor.cli import app
try:
    profile.runcall(app, sys.argv[1:], standalone_mode=False)
finally:
    profile.dump_stats(out)
"""


def target_command(target: str, config: Path, port: int, profile: Optional[Path]) -> tuple[list[str], dict]:
    if target == "floor":
        return ([sys.executable, "-m", "uvicorn", "passthrough_app:app", "--app-dir", str(ROOT / "benchmarks"), "--port", str(port),
                 "--log-level", "warning", "--backlog", "4096", "--timeout-keep-alive", "75"], {})
    # cProfile on a CPU clock (the default wall clock charges a busy machine's waits to whatever ran last).
    run = [sys.executable, "-c", PROFILED, str(profile)] if profile else [sys.executable, "-m", "openconductor"]
    args = run + ["serve", "--config", str(config), "--port", str(port), "--log-level", "warning"]
    return (args + (["--workers", "2"] if target == "conductor-2p" else []), {})


def print_profile(path: Path, top: int) -> None:
    import pstats

    print(f"\nprofile of the conductor server under this load (cProfile on CPU time, main thread; top {top} by "
          "cumulative and by own time; profiling inflates the CPU figures above):")
    pstats.Stats(str(path)).sort_stats("cumtime").print_stats(top)
    pstats.Stats(str(path)).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--targets", nargs="+", default=["floor", "conductor", "conductor-2p"],
                        choices=["floor", "conductor", "conductor-2p", "before"])
    parser.add_argument("--before-src", type=Path, help="target 'before': `conductor serve` from another checkout's src/ (e.g. main's)")
    parser.add_argument("--latency", type=float, default=0.2, help="upstream latency per call (s)")
    parser.add_argument("--steps", type=int, default=1, choices=[1, 2], help="1: single; 2: self-reflection with one revision")
    parser.add_argument("--stream", action="store_true", help="stream the responses (SSE)")
    parser.add_argument("--mode", choices=["burst", "sustained"], default="burst")
    parser.add_argument("--duration", type=float, default=10.0, help="sustained mode: seconds of load after the ramp")
    parser.add_argument("--server-cpus", help="pin the target server to these CPUs, e.g. 0,1 (Linux)")
    parser.add_argument("--upstream-cpus", help="pin the simulated upstream to these CPUs")
    parser.add_argument("--client-cpus", help="pin the load generator processes to these CPUs")
    parser.add_argument("--client-procs", type=int, default=4, help="load generator processes")
    parser.add_argument("--profile", type=int, metavar="N", help="run the conductor target under cProfile and print its top N functions")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    def pin(cpus):
        if not cpus:
            return None
        chosen = {int(c) for c in cpus.split(",")}
        return lambda: os.sched_setaffinity(0, chosen)

    client_cpus = {int(c) for c in args.client_cpus.split(",")} if args.client_cpus else None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    critical = args.latency * args.steps
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        upstream_proc = None
        try:
            up_port = free_port()
            upstream = f"http://127.0.0.1:{up_port}"
            upstream_proc = subprocess.Popen([sys.executable, "-m", "openconductor.server.simulated_upstream", "--port", str(up_port),
                                              "--latency", str(args.latency)], env=env, preexec_fn=pin(args.upstream_cpus))
            wait_ready(upstream + "/control", upstream_proc)
            print(f"simulated workers over loopback HTTP · policy {'single' if args.steps == 1 else 'self-reflection'} "
                  f"({args.steps} step(s)) · upstream latency {args.latency:g}s · critical path {critical:g}s · "
                  f"{'streaming' if args.stream else 'non-streaming'} · {args.mode} · {os.cpu_count()} CPUs · load avg {os.getloadavg()[0]:.1f}"
                  + (f" · server on CPUs {args.server_cpus}" if args.server_cpus else ""))
            print(f"{'target':>13} {'concurrent':>10} {'requests':>8} {'errors':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'p50-cp ms':>9} "
                  f"{'p99-cp ms':>9} {'srv cpu ms/req':>14} {'load avg':>8}")
            for target in args.targets:
                directory = Path(tmp) / target
                directory.mkdir()
                config = write_config(directory, upstream, args.steps)
                profile = directory / "profile.out" if args.profile and target == "conductor" else None
                port = free_port()
                command, _ = target_command(target, config, port, profile)
                target_env = {**env, "UPSTREAM": upstream}
                if target == "before":
                    if args.before_src is None:
                        parser.error("target 'before' needs --before-src")
                    target_env["PYTHONPATH"] = str(args.before_src.resolve())
                proc = subprocess.Popen(command, env=target_env, preexec_fn=pin(args.server_cpus), cwd=tmp)
                try:
                    url = f"http://127.0.0.1:{port}"
                    wait_ready(url + "/health", proc)
                    time.sleep(1.0)  # worker processes of conductor-2p start after the port is bound
                    for n in args.concurrency:
                        cpu0 = cpu_seconds(proc.pid)
                        r = load(url, n, min(args.client_procs, n), client_cpus, stream=args.stream, mode=args.mode,
                                 duration=args.duration, ramp=critical)
                        cpu1 = cpu_seconds(proc.pid)
                        handled = r["requests"] + r["warmup"]  # the warm-up requests are inside the CPU window too
                        lat = r["latencies"]
                        row = {"target": target, "concurrency": n, "ok": len(lat), "errors": len(r["errors"]), "wall_s": r["wall_s"],
                               "requests": r["requests"], "throughput_rps": len(lat) / r["wall_s"],
                               "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000,
                               "p50_overhead_ms": (pct(lat, 50) - critical) * 1000, "p99_overhead_ms": (pct(lat, 99) - critical) * 1000,
                               "server_cpu_ms_per_request": (cpu1 - cpu0) * 1000 / handled, "load_avg": os.getloadavg()[0],
                               "client_cpu_s": r["client_cpu_s"], "first_errors": r["errors"][:3]}
                        rows.append(row)
                        print(f"{target:>13} {n:>10} {row['requests']:>8} {row['errors']:>6} {row['throughput_rps']:>8.1f} "
                              f"{row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} {row['p50_overhead_ms']:>9.1f} {row['p99_overhead_ms']:>9.1f} "
                              f"{row['server_cpu_ms_per_request']:>14.2f} {row['load_avg']:>8.1f}", flush=True)
                        for e in row["first_errors"]:
                            print("   error:", e)
                finally:
                    proc.send_signal(signal.SIGINT)  # uvicorn shuts down cleanly (and cProfile writes its file)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                if profile is not None and profile.exists():
                    print_profile(profile, args.profile)
        finally:
            if upstream_proc is not None:
                upstream_proc.terminate()
                upstream_proc.wait(timeout=10)
    by = {(r["target"], r["concurrency"]): r for r in rows}
    if len(args.targets) > 1:
        print("\nratios in this run (same machine, same load generator):")
        for n in args.concurrency:
            floor, one_p, two_p = by.get(("floor", n)), by.get(("conductor", n)), by.get(("conductor-2p", n))
            parts = []
            if floor and one_p:
                parts.append(f"conductor CPU/req = {one_p['server_cpu_ms_per_request'] / floor['server_cpu_ms_per_request']:.2f} x floor "
                             f"({one_p['server_cpu_ms_per_request']:.2f} vs {floor['server_cpu_ms_per_request']:.2f} ms)")
            before = by.get(("before", n))
            if before and one_p:
                parts.append(f"before/now CPU/req = {before['server_cpu_ms_per_request'] / one_p['server_cpu_ms_per_request']:.2f} x")
            if one_p and two_p:
                parts.append(f"2 processes: {two_p['throughput_rps'] / one_p['throughput_rps']:.2f} x the req/s of 1, "
                             f"p99 overhead {two_p['p99_overhead_ms']:.0f} vs {one_p['p99_overhead_ms']:.0f} ms")
            print(f"  {n:>5} concurrent: " + "; ".join(parts))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
