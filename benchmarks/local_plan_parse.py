"""How often the grammar-constrained conductor of the offline local pool writes a plan that does not parse.
The pool's own conductor: its shipped trained one (``builtin:local-tools``), another trained one with
``--conductor DIR`` (e.g. a ``conductor fit`` output), or with ``--untrained`` the prompted SmolLM2 backend.

Plans only (no worker runs): the LM conductor on the packaged local pool (SmolLM2-135M under a GBNF
grammar) plans N reasoning-gym basic_arithmetic questions with the pool's own settings (max_tokens,
max_attempts, temperature), one seed per question. Prints, per question, the attempts it took and why
each rejected attempt failed, then the totals.

    PYTHONPATH=src python benchmarks/local_plan_parse.py --n 13

``--endpoint URL`` plans with the prompted conductor on an OpenAI-compatible server instead (an ``openai`` backend,
e.g. ``python tests/llama_http_server.py qwen2.5-coder-0.5b-instruct``, which prints its URL), each question twice:
under the planning format's JSON schema (``response_format``, the provider's default) and as free text
(``options.json_schema = false``), side by side.

The conductor backend's timeout is raised (``--timeout``) so a slow machine counts parse failures,
not timeouts.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import time

from openconductor import Pool, load_default_pool, make_policy
from openconductor.policies.base import PlanRequest
from openconductor.conductor.checkpoint import trained_conductor
from openconductor.tasks import load_task


def on_endpoint(spec, url: str, json_schema: bool):
    """The pool with its prompted conductor on an OpenAI-compatible server at ``url`` (constrained by JSON schema or not)."""
    backend = spec.conductor.backend.model_copy(update={"name": "conductor-http", "provider": "openai", "model": "conductor",
                                                        "base_url": url.rstrip("/") + "/v1", "options": {"json_schema": json_schema}})
    return spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None, "backend": backend})})


async def main(n: int, seed: int, timeout: float, untrained: bool, conductor: str | None = None, endpoint: str | None = None) -> None:
    if endpoint:
        for json_schema in (True, False):
            await plans(on_endpoint(load_default_pool(), endpoint, json_schema), n, seed, timeout,
                        f"prompted conductor on {endpoint} ({'JSON-schema-constrained' if json_schema else 'free text'}")
        return
    spec = load_default_pool()
    if conductor:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": conductor})})
    if untrained:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None})})
    elif spec.conductor.checkpoint is not None:
        spec, _ = trained_conductor(spec, spec.conductor.checkpoint)
    await plans(spec, n, seed, timeout, f"local pool conductor ({spec.conductor.checkpoint or spec.conductor.backend.model}, grammar-constrained")


async def plans(spec, n: int, seed: int, timeout: float, label: str) -> None:
    # A slow (shared) machine should measure parsing, not the backend's timeout.
    backend = spec.conductor.backend.model_copy(update={"timeout_s": timeout})
    spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"backend": backend})})
    task = load_task("basic_arithmetic", limit=n, seed=seed)
    policy = make_policy("conductor")
    codes: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()  # what the parser said, e.g. "missing list(s)"
    resampled = fallbacks = 0
    seconds = []
    async with Pool(spec) as pool:
        for i, q in enumerate(task.questions):
            start = time.perf_counter()
            plan = await policy.plan(PlanRequest(task.text(q), pool, max_steps=spec.conductor.max_steps, seed=seed + i))
            seconds.append(time.perf_counter() - start)
            record = plan.record
            errors = [e.split(":", 1)[0] for e in record.errors]
            codes.update(errors)
            reasons.update(e.split(":", 2)[1].strip() if e.count(":") >= 2 else e for e in record.errors)
            resampled += record.attempts > 1
            fallbacks += record.fallback is not None
            print(f"question {i:>2}: attempts {record.attempts}  rejected {errors or '-'}  fallback {record.fallback or '-'}  "
                  f"{seconds[-1]:.1f} s", flush=True)
    print(f"\n{label}, max_tokens {spec.conductor.max_tokens}, "
          f"max_attempts {spec.conductor.max_attempts}), {n} plans, wall seconds per plan: median {statistics.median(seconds):.1f}, "
          f"max {max(seconds):.1f} (the first includes loading the model)")
    print(f"plans that needed a resample: {resampled} of {n}; plans that fell back: {fallbacks} of {n}")
    print(f"rejected attempts by error: {dict(codes) or 'none'}")
    print(f"rejected attempts by parser message: {dict(reasons) or 'none'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=13, help="questions to plan")
    parser.add_argument("--seed", type=int, default=0, help="task generator seed; question i plans with seed + i")
    parser.add_argument("--timeout", type=float, default=3600.0, help="the conductor backend's timeout_s (the pool's: 300)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--untrained", action="store_true", help="plan with the prompted backend, not the shipped trained conductor")
    which.add_argument("--conductor", help="a trained conductor's folder to plan with instead of the shipped one")
    which.add_argument("--endpoint", help="an OpenAI-compatible server (http://HOST:PORT) to plan on, with and without the JSON schema")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.seed, args.timeout, args.untrained, args.conductor, args.endpoint))
