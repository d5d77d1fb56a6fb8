"""Helpers for the server tests: pool files, configs, and a real uvicorn server on a free loopback port."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

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
