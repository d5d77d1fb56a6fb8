"""Decoding throughput of the offline pool's local models: one llama.cpp thread against all cores.

    PYTHONPATH=src python benchmarks/local_threads.py [--model qwen2.5-coder-0.5b-instruct] [--requests 8] [--busy]

Runs the same requests, two at a time (the pool's ``concurrency = 2``), through the real provider
(``LocalGGUFProvider``, one server with two slots) with ``threads = 1`` and then with ``threads = N`` (every
core), and prints output tokens per second of wall time for each and their ratio, measured side by side.
``--busy`` runs a CPU-bound process on one core throughout, as when another job shares the machine.
The loop guard is off here so that every request decodes the same number of tokens.
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


async def throughput(model: str, threads: int, requests: int, max_tokens: int) -> float:
    spec = WorkerSpec(name=f"t{threads}", provider="local_gguf", model=model, concurrency=2,
                      options={"threads": threads, "stop_loops": False, "shared": False})
    provider = LocalGGUFProvider(spec)
    gate = asyncio.Semaphore(2)

    async def one(k: int) -> int:
        async with gate:
            c = await provider.complete([{"role": "user", "content": f"Write a Python program that prints the sum of the first {k + 3} primes, and explain it."}],
                                        max_tokens=max_tokens, temperature=0.0)
            return c.usage.output_tokens

    await one(0)  # load the weights outside the timing
    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(k) for k in range(requests))))
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with another process")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    spinner = multiprocessing.Process(target=_spin, daemon=True) if args.busy else None
    if spinner:
        spinner.start()
    try:
        rates = {n: asyncio.run(throughput(args.model, n, args.requests, args.max_tokens)) for n in sorted({1, cores})}
    finally:
        if spinner:
            spinner.terminate()
    for n, rate in rates.items():
        print(f"{args.model}, {n} thread(s){', one core busy' if args.busy else ''}: {rate:.1f} output tokens/s")
    if len(rates) > 1:
        print(f"{cores} threads / 1 thread: {rates[cores] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
