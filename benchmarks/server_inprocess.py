"""Where a request's CPU goes inside the server, without HTTP: one-step runs on a SIMULATED worker with
no latency, timed in process (process CPU time, best of 3 rounds of N requests).

    PYTHONPATH=src python benchmarks/server_inprocess.py --requests 1000

Rows: the executor alone (``solve``), the whole server path (request validation, admission, the run,
response building, metrics, trace saves), the same without trace saves, and single pieces. The machine
and its load change the absolute numbers; the rows of one run compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from openconductor.executor import solve
from openconductor.policies import make_policy
from openconductor.pool import Pool, load_pool
from openconductor.server import parse_server_config
from openconductor.server.client import TRUSTED
from openconductor.server.gateway import CHAT, Gateway
from openconductor.traces import row

BODY = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "load request 17"}]}).encode()


def setup(directory: Path):
    (directory / "pool.yaml").write_text(yaml.safe_dump({"name": "sim", "workers": [{"name": "alpha", "provider": "simulated"}]}))
    return parse_server_config({"auth": {"required": False}, "server": {"traces": str(directory / "traces.sqlite3")},
                                "models": {"bench": {"version": "1", "pool": "pool.yaml", "policy": "single",
                                                     "limits": {"max_calls": 2, "max_depth": 0}}}}, base_dir=directory)


async def best(fn, n: int, rounds: int = 3) -> float:
    """Microseconds of process CPU per call of the coroutine function ``fn`` (best round)."""
    for _ in range(min(n, 200)):
        await fn()
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(n):
            await fn()
        times.append((time.process_time() - start) / n * 1e6)
    return min(times)


async def main(n: int, directory: Path) -> None:
    config = setup(directory)
    rows: list[tuple[str, float]] = []
    async with Pool(load_pool(directory / "pool.yaml")) as pool:
        policy = make_policy("single")
        rows.append(("executor: solve() of a one-step run", await best(lambda: solve("load request 17", policy, pool), n)))

    async def server_path(gateway: Gateway):
        accepted, handle = await gateway.open(TRUSTED, CHAT, json.loads(BODY))
        return (await gateway.answer(CHAT, accepted, handle)).model_dump_json(exclude_unset=True)

    for label, no_traces in (("server path: validate, admit, run, answer, metrics, traces", False), ("server path without trace saves", True)):
        gateway = Gateway(config)
        await gateway.start()
        if no_traces:
            gateway.runtime.save = lambda run: None  # type: ignore[method-assign]
        rows.append((label, await best(lambda: server_path(gateway), n)))
        if not no_traces:
            accepted, handle = await gateway.open(TRUSTED, CHAT, json.loads(BODY))
            run = await handle.wait()
            answer = await gateway.answer(CHAT, accepted, handle)
            piece_n = n * 3

            async def validate():
                return CHAT.interpret(CHAT.schema.model_validate(json.loads(BODY)))

            async def build():
                return CHAT.answer(run, handle.request, accepted)

            async def dump():
                return answer.model_dump_json(exclude_unset=True)

            async def serialise():
                return row(run, "owner")

            for what, fn in (("  parse + validate + interpret the request", validate), ("  build the ChatCompletion (SDK types)", build),
                             ("  serialise it", dump), ("  serialise one trace row", serialise)):
                rows.append((what, await best(fn, piece_n)))
        await gateway.stop()
    print(f"in process, simulated worker (no latency), {n} requests per round, best of 3; CPU per request:")
    for label, us in rows:
        print(f"  {label:62s} {us:8.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    with tempfile.TemporaryDirectory() as tmp:
        run(main(args.requests, Path(tmp)))
    sys.exit(0)
