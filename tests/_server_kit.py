"""Helpers for the server tests: pool files, configs, a real uvicorn server on a free loopback port, and the
hostile clients (request heads and bodies) that tests/test_server_hardening.py, tests/test_server_crash.py and
benchmarks/server_hostile.py send alike (the benchmark puts tests/ on its path)."""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import urlparse

import uvicorn
import yaml

from openconductor.providers.simulated import register_responder
from openconductor.server import create_app, hash_key, parse_server_config
from openconductor.server.protocol import PROTOCOL

KEY = "sk-test-alpha"
OTHER_KEY = "sk-test-beta"


@register_responder("serve-test-plan")
def _plan(spec, messages, rng: random.Random) -> str:
    """A conductor backend that always writes the same two-step workflow (alpha drafts, beta finalises)."""
    return ('Reasoning: draft then check.\nmodel_id = [0, 1]\n'
            'subtasks = ["Draft an answer to the task.", "Check the draft and give the final answer."]\n'
            'access_list = [[], ["all"]]')


def sim_worker(name: str, latency: float = 0.02, **options: Any) -> dict:
    return {"name": name, "provider": "simulated", "price_input_per_m": 1.0, "price_output_per_m": 2.0,
            "options": {"latency_s": latency, **options}}


def write_pool(directory: Path, name: str, workers: list[dict], **extra: Any) -> str:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "workers": workers, **extra}))
    return path.name


def sim_pool(directory: Path, latency: float = 0.02, name: str = "sim", **extra: Any) -> str:
    """alpha + beta simulated workers and a conductor backend that writes a fixed two-step plan."""
    workers = [sim_worker("alpha", latency), sim_worker("beta", latency)]
    conductor = {"backend": {"name": "planner", "provider": "simulated", "options": {"world": "serve-test-plan", "latency_s": 0.005}},
                 "max_steps": 3}
    return write_pool(directory, name, workers, conductor=conductor, **extra)


def http_pool(directory: Path, base_url: str, worker: str = "remote") -> str:
    """One worker (provider openai) on an OpenAI-compatible upstream at ``base_url``."""
    return write_pool(directory, "http", [{"name": worker, "provider": "openai", "model": worker, "base_url": f"{base_url}/v1"}])


def config(directory: Path, models: dict, keys: list[dict] | None = None, **sections: Any):
    keys = [{"name": "alpha", "sha256": hash_key(KEY), "max_concurrent": 8, "requests_per_minute": 6000}] if keys is None else keys
    data = {"keys": keys, "models": models, **sections}
    if not keys:
        data.setdefault("auth", {"required": False})
    return parse_server_config(data, base_dir=directory)


def closed_port_url() -> str:
    """A loopback URL nothing listens on (a server that is down)."""
    return f"http://127.0.0.1:{free_port()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(app, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yields the base URL."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", http=PROTOCOL))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def serve(cfg) -> Iterator[str]:
    with running(create_app(cfg)) as url:
        yield url


# ------------------------------------------------------------------------------------ hostile clients


def send_head(url: str, parts: Iterable[bytes], timeout: float = 60) -> bytes:
    """Send a request head made of ``parts`` (bytes chunks, sent in turn) on a fresh connection while reading
    what comes back; the sender stops quietly when the server closes."""
    u = urlparse(url)
    got = bytearray()
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as s:
        def sender():
            try:
                for part in parts:
                    s.sendall(part)
            except OSError:  # the server answered 431 and stopped reading
                pass

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
        thread.join(timeout)
    return bytes(got)


HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\n"


def big_line(megabytes: int) -> Iterator[bytes]:
    """A request head with one header line of ``megabytes`` MB, sent a megabyte at a time."""
    yield HEAD + b"X-Big: "
    chunk = b"a" * (1 << 20)
    for _ in range(megabytes):
        yield chunk
    yield b"\r\n\r\n"


HOSTILE_HEADS = {
    "50 MB header line": lambda: big_line(50),
    "1 MB header line": lambda: big_line(1),
    "10,000 headers": lambda: [HEAD + b"".join(b"X-H%d: v\r\n" % i for i in range(10_000)) + b"\r\n"],
    "37 KB in 90 headers": lambda: [HEAD + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 400) for i in range(90)) + b"\r\n"],
}


def hostile_bodies(model: str = "one") -> list[tuple[str, bytes]]:
    """Chat requests under the 1 MB body limit that cost the server the most to check or to run."""
    ask = {"model": model, "messages": [{"role": "user", "content": "q"}]}

    def schema(n: int, pad: int) -> dict:
        return {"type": "object", "properties": {f"field_{i:05d}": {"type": "string", "description": "d" * pad} for i in range(n)}}

    fmt = lambda s: {**ask, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": s}}}  # noqa: E731
    bodies = [
        ("0.88 MB schema, 10,000 properties", fmt(schema(10_000, 34))),
        ("schema near the cap, 1,200 properties", fmt(schema(1_200, 20))),
        ("980-deep body", b'{"model": "%s", "metadata": ' % model.encode() + b"[" * 980 + b"]" * 980 + b"}"),
        ("20,000 messages", {"model": model, "messages": [{"role": "user", "content": "x y"}] * 20_000}),  # over max_json_values
        ("6,000 messages", {"model": model, "messages": [{"role": "user", "content": "x y"}] * 6_000}),
        ("one 900 KB message", {"model": model, "messages": [{"role": "user", "content": "word " * 180_000}]}),
        ("128 tools", {**ask, "tools": [{"type": "function", "function": {"name": f"t{i}", "parameters": schema(30, 40)}} for i in range(128)]}),
        ("$ref cycle", {**ask, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#"}}}]}),
    ]
    return [(name, b if isinstance(b, bytes) else json.dumps(b).encode()) for name, b in bodies]


SLOW_STEP = re.compile(r"Executing (.*?) took (\d+\.\d+) seconds")  # asyncio's debug mode (server.slow_callback_ms)
LOOP_LAG = re.compile(r"event loop lag (\d+\.\d+) ms")  # server.metrics.watch_loop_lag, in the same mode


def slow_steps(log: str) -> list[tuple[float, str]]:
    """The event-loop steps a server's debug log names as slow (seconds, what ran), longest first."""
    return sorted(((float(m.group(2)), re.sub(r" (created at|defined at|wait_for=).*", "", m.group(1))[:110])
                   for m in SLOW_STEP.finditer(log)), reverse=True)


def loop_lags(log: str) -> list[float]:
    """The event loop's lags over the threshold that a server's debug log records, in seconds."""
    return [float(m.group(1)) / 1000 for m in LOOP_LAG.finditer(log)]
