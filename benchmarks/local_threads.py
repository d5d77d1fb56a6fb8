"""Decoding throughput of the offline pool's local models: one llama.cpp thread per model against all cores.

    PYTHONPATH=src python benchmarks/local_threads.py [--model qwen2.5-coder-0.5b-instruct ...] [--requests 8] [--busy]

Runs the same requests, two at a time per model (the pool's ``concurrency = 2``), through the real provider
(``LocalGGUFProvider``, one server with two slots per model) with ``threads = 1`` and then with ``threads = N``
(every core), and prints output tokens per second of wall time for each and their ratio, measured side by
side. Several ``--model`` flags run those models at the same time, each on its own server (as a pool's
workers do), so their threads compete for the cores. ``--busy`` runs a CPU-bound process on one core
throughout, as when another job shares the machine. The loop guard is off here so that every request
decodes the same number of tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time

from openconductor.pool import WorkerSpec
from openconductor.providers.local_gguf import LocalGGUFProvider


def _spin() -> None:
    while True:
        pass


async def throughput(models: list[str], threads: int, requests: int, max_tokens: int) -> float:
    providers = [LocalGGUFProvider(WorkerSpec(name=f"{m}-t{threads}", provider="local_gguf", model=m, concurrency=2,
                                              options={"threads": threads, "stop_loops": False, "shared": False})) for m in models]

    async def one(provider: LocalGGUFProvider, gate: asyncio.Semaphore, k: int) -> int:
        async with gate:
            c = await provider.complete([{"role": "user", "content": f"Write a Python program that prints the sum of the first {k + 3} primes, and explain it."}],
                                        max_tokens=max_tokens, temperature=0.0)
            return c.usage.output_tokens

    gates = [asyncio.Semaphore(2) for _ in providers]
    await asyncio.gather(*(one(p, g, 0) for p, g in zip(providers, gates)))  # load the weights outside the timing
    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(p, g, k) for p, g in zip(providers, gates) for k in range(requests))))
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=None, help="a packaged model (repeatable: run them at the same time)")
    parser.add_argument("--requests", type=int, default=8, help="requests per model")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with another process")
    args = parser.parse_args()
    models = args.model or ["qwen2.5-coder-0.5b-instruct"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    spinner = multiprocessing.Process(target=_spin, daemon=True) if args.busy else None
    if spinner:
        spinner.start()
    try:
        rates = {n: asyncio.run(throughput(models, n, args.requests, args.max_tokens)) for n in sorted({1, cores})}
    finally:
        if spinner:
            spinner.terminate()
    label = " + ".join(models) + (", one core busy" if args.busy else "")
    for n, rate in rates.items():
        print(f"{label}: {n} thread(s) per model: {rate:.1f} output tokens/s")
    if len(rates) > 1:
        print(f"{cores} threads / 1 thread: {rates[cores] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
