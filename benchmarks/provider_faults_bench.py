"""Measure retry behaviour of the remote providers against the loopback fault server.

Prints, per provider (real openai / anthropic / google-genai SDKs over real HTTP on 127.0.0.1):
the median latency of a clean call, the measured wait after a 429 with Retry-After, and the time a
call takes to recover from each fault kind. These are loopback numbers for the retry machinery,
not the latency of any vendor's service.

    PYTHONPATH=src python benchmarks/provider_faults_bench.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fault_server import Fault, FaultServer  # noqa: E402

from openconductor.pool import Pool, PoolSpec, WorkerSpec  # noqa: E402

KEY_ENV = "OC_BENCH_KEY"
TIMEOUT_S = 0.5


async def timed_call(pool: Pool) -> tuple[float, int]:
    start = time.perf_counter()
    _, attempts = await pool[0].call([{"role": "user", "content": "hi"}])
    return time.perf_counter() - start, attempts


async def bench(server: FaultServer, provider: str, repeats: int) -> None:
    base = server.url + "/v1" if provider == "openai" else server.url
    spec = WorkerSpec(name=provider, provider=provider, model="bench", base_url=base, api_key_env=KEY_ENV, timeout_s=TIMEOUT_S, max_retries=3)
    async with Pool(PoolSpec(name="bench", workers=[spec])) as pool:
        await timed_call(pool)  # warm the connection and the SDK
        clean = [(await timed_call(pool))[0] for _ in range(repeats)]
        print(f"{provider:9s} clean call, median of {repeats}: {statistics.median(clean) * 1000:.1f} ms")
        server.reset()
        server.script(Fault.http(429, retry_after=1), Fault.ok())
        await timed_call(pool)
        gap = server.log[1].at - server.log[0].at
        print(f"{provider:9s} 429 + Retry-After: 1 -> next attempt {gap:.3f} s after the first")
        for name, fault in [("timeout", Fault.timeout(2.0)), ("503", Fault.http(503)), ("malformed JSON", Fault.malformed()), ("empty", Fault.empty())]:
            server.reset()
            server.script(fault, Fault.ok())
            took, attempts = await timed_call(pool)
            print(f"{provider:9s} {name:>14s} then ok: {took:.3f} s, {attempts} attempts")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "bench-key")
    logging.getLogger("openconductor").setLevel(logging.ERROR)  # the retry warnings are expected here
    server = FaultServer().start()
    try:
        print(f"loopback fault server {server.url}; worker timeout_s={TIMEOUT_S}; backoff 0.25 s x U(0.8, 1.2) on the first retry")
        for provider in ("openai", "anthropic", "gemini"):
            await bench(server, provider, args.repeats)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
