"""Where the offline pool's conductor spends its planning time, phase by phase, against the model's own decode limit, and
how often its grammar-constrained plans fail to parse (README "Runtime", [5]; docs/results.md [51]).

The pool's own conductor (its shipped trained one, ``builtin:local-tools``; another with ``--conductor DIR``; the prompted
SmolLM2 backend with ``--untrained``) plans N reasoning-gym basic_arithmetic questions, one seed per question, no worker runs.
Each question is planned in three modes, interleaved so that a loaded machine slows them alike, each on its own llama.cpp
server (so that none finds another's prompt in its cache):

- ``before``: as planning ran before issue 71: the per-plan lookups recomputed (the manifest, the grammar, the fallback
  plan, the identity) and the familiarity gate comparing the question with every training question in turn;
- ``after``: as it runs now, by default;
- ``drafts``: and with n-gram speculative drafts (``draft = "ngram"`` on the pool's ``[conductor] backend``; off by
  default because it can tip a near-tie: the identical-plans line says how many plans it changed).

Per plan it prints the milliseconds in each phase: the prompt's render, the familiarity gate, the binding and grammar,
the backend call outside llama.cpp's two timed phases ("server": the thread hop, the chat template, tokenisation, slot
choice, grammar set-up),
prefill (prompt tokens processed / taken from the slot's cache), decode (tokens, and drafted / accepted with drafts),
the grammar's share of decode (this decode minus the limit's), parse/validate, the run's identity lookup, and the rest
(Python and thread hops). The limit: the same model decoding the same number of tokens from the same prompt with no
grammar, no drafts and a warm KV cache, measured right after each plan. One warm-up plan per mode is not counted (it
loads the model and fills the slot's cache with the pool's prompt).

    PYTHONPATH=src python benchmarks/planning_latency.py --n 13

``--endpoint URL`` instead plans with the prompted conductor on an OpenAI-compatible server (an ``openai`` backend, e.g.
``python tests/llama_http_server.py qwen2.5-coder-0.5b-instruct``, which prints its URL), each question twice: under the
planning format's JSON schema (``response_format``, the provider's default) and as free text (``options.json_schema =
false``), and counts the plans that needed a resample or fell back (docs/results.md [58]).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import time
from contextlib import contextmanager

from openconductor import Pool, load_default_pool, make_policy
from openconductor.conductor import familiar, identity, manifest, prompt
from openconductor.conductor.checkpoint import trained_conductor
from openconductor.policies import lm
from openconductor.policies.base import PlanRequest
from openconductor.providers.local_gguf import _server
from openconductor.tasks import load_task

MODES = ("before", "after", "drafts")
PHASES = ("render", "gate", "grammar", "server", "prefill", "decode", "parse", "identity", "other")


def dense_similarities(self, text: str) -> list[float]:
    """The gate's comparison before issue 71: the question against every training vector, gram by gram."""
    query = self._vector(familiar.grams(text))
    return [min(1.0, sum(w * ref.get(g, 0.0) for g, w in query.items())) for ref in self.vectors]


@contextmanager
def as_before(spec):
    """Planning as it ran before: every per-plan lookup recomputed, the gate's dense comparison."""
    for cache in (manifest._parsed, prompt._bounded, prompt._grammar):
        cache.cache_clear()
    for kept in (identity._LISTINGS, identity._DIGESTS):
        kept.clear()
    if spec.conductor.gates_unfamiliar:
        found, _ = familiar.pool_familiarity(spec)
        found.__dict__.pop("_fallback", None)
    sparse, familiar.Index.similarities = familiar.Index.similarities, dense_similarities
    try:
        yield
    finally:
        familiar.Index.similarities = sparse


def spec_for(args, mode: str):
    spec = load_default_pool()
    if args.conductor:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": args.conductor})})
    if args.untrained:
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None})})
    elif spec.conductor.checkpoint is not None:
        spec, _ = trained_conductor(spec, spec.conductor.checkpoint)
    # A slow (shared) machine should measure planning, not the backend's timeout. Own servers: "before" unshared (keyed by
    # its name), "drafts" keyed by its drafts.
    options = {**spec.conductor.backend.options, "draft": "ngram" if mode == "drafts" else "none", "shared": mode != "before"}
    backend = spec.conductor.backend.model_copy(update={"timeout_s": args.timeout, "options": options})
    return spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"backend": backend})})


def instrument(policy, backend, times: dict, seen: dict) -> None:
    """Time plan()'s phases where it calls them (the policy's own steps, the module's names, the backend worker)."""
    def timed(name, fn, is_async=False):
        async def atimed(*a, **k):
            start = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                times[name] += time.perf_counter() - start

        def stimed(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[name] += time.perf_counter() - start
        return atimed if is_async else stimed

    async def call(*a, **k):
        completion, attempts = await original(*a, **k)
        seen["completion"] = completion
        return completion, attempts

    original = backend.call
    backend.call = timed("llama", call, True)
    policy._messages = timed("render", policy._messages)
    policy._familiarity = timed("gate", policy._familiarity, True)
    for name, phase in (("trained_binding", "grammar"), ("planning_grammar", "grammar"), ("parse_and_validate", "parse")):
        setattr(lm, name, timed(phase, getattr(lm, name)))  # plan() looks these up in its module on every call


def limit(provider, messages: list, n: int) -> dict:
    """The same model decoding ``n`` tokens from the same prompt with no grammar and no drafts, its prompt cached (by this
    question's plan, or for "drafts" by its "after" plan on the draft-free server)."""
    server = _server(provider.path, provider.spec.concurrency, provider.ctx_per_slot, provider.threads, provider.threads_batch,
                     provider.owner, "none")
    timings: dict = {}

    def read(chunk: dict) -> bool:
        timings.update(chunk.get("timings") or {})
        return False

    start = time.perf_counter()
    server.handle_chat_completions({"messages": messages, "max_tokens": n, "temperature": 0.0, "ignore_eos": True, "stream": True,
                                    "timings_per_token": True}, read)
    return {"wall": time.perf_counter() - start, "decode": timings.get("predicted_ms", 0.0) / 1000, "cache_n": timings.get("cache_n", 0)}


async def plan_once(policy, pool, question: str, seed: int, times: dict, seen: dict) -> dict:
    times.clear()
    spec = pool.spec
    request = PlanRequest(question, pool, max_steps=spec.conductor.max_steps, seed=seed)
    start = time.perf_counter()
    plan = await policy.plan(request)
    wall = time.perf_counter() - start
    start = time.perf_counter()
    identity.identity_dict(policy, pool)  # every run asks, outside plan()
    row = {"identity": time.perf_counter() - start, "record": plan.record, **{k: times.get(k, 0.0) for k in ("render", "gate", "grammar", "parse")}}
    completion = seen.pop("completion", None) if plan.record.familiarity is None or not plan.record.familiarity.gated else None
    t = completion.timings if completion is not None else {}
    row.update(prefill=t.get("prompt_ms", 0) / 1000, decode=t.get("predicted_ms", 0) / 1000, prompt_n=t.get("prompt_n", 0),
               cache_n=t.get("cache_n", 0), tokens=t.get("predicted_n", 0), drafted=t.get("draft_n", 0), accepted=t.get("draft_n_accepted", 0))
    row["server"] = max(times.get("llama", 0.0) - row["prefill"] - row["decode"], 0.0)
    row["total"] = wall + row["identity"]
    row["other"] = max(row["total"] - sum(row[p] for p in PHASES if p != "other"), 0.0)
    row["limit"] = limit(pool.conductor_backend().provider, policy._messages(request), row["tokens"]) if row["tokens"] else None
    return row


def show(mode: str, i: int, row: dict) -> None:
    ms = lambda x: f"{x * 1000:7.1f}"  # noqa: E731
    r, lim = row["record"], row["limit"]
    grammar = f"{ms(row['decode'] - lim['decode'])}" if lim else "      -"
    print(f"{mode:6} q{i:<3} " + " ".join(ms(row[p]) for p in PHASES) + f" {ms(row['total'])} {ms(lim['wall']) if lim else '      -'}"
          f" {grammar}  prompt {row['prompt_n']}/{row['cache_n']} cached, {row['tokens']} tokens, drafted {row['drafted']}/{row['accepted']}"
          f" accepted; attempts {r.attempts} {'gated' if r.familiarity and r.familiarity.gated else ''}", flush=True)


def summary(mode: str, rows: list[dict]) -> dict:
    totals = sorted(r["total"] for r in rows)
    limits = [r["limit"]["wall"] for r in rows if r["limit"]]
    p95 = statistics.quantiles(totals, n=20, method="inclusive")[18] if len(totals) > 1 else totals[0]
    out = {p: statistics.median(r[p] for r in rows) for p in PHASES}
    out.update(total=statistics.median(totals), p95=p95, limit=statistics.median(limits) if limits else 0.0,
               ratio=statistics.median(r["total"] / r["limit"]["wall"] for r in rows if r["limit"]) if limits else 0.0)
    return out


def on_endpoint(url: str, json_schema: bool):
    """The default pool with its prompted conductor on an OpenAI-compatible server at ``url``, constrained by JSON schema or not."""
    spec = load_default_pool()
    backend = spec.conductor.backend.model_copy(update={"name": "conductor-http", "provider": "openai", "model": "conductor",
                                                        "base_url": url.rstrip("/") + "/v1", "options": {"json_schema": json_schema}})
    return spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"checkpoint": None, "backend": backend})})


async def endpoint_plans(args) -> None:
    """``--endpoint``: parse failures with and without the JSON schema, side by side on the same questions and seeds."""
    task = load_task("basic_arithmetic", limit=args.n, seed=args.seed)
    for json_schema in (True, False):
        spec = on_endpoint(args.endpoint, json_schema)
        backend = spec.conductor.backend.model_copy(update={"timeout_s": args.timeout})
        spec = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"backend": backend})})
        policy, records, seconds = make_policy("conductor"), [], []
        async with Pool(spec) as pool:
            for i, q in enumerate(task.questions):
                start = time.perf_counter()
                plan = await policy.plan(PlanRequest(task.text(q), pool, max_steps=spec.conductor.max_steps, seed=args.seed + i))
                seconds.append(time.perf_counter() - start)
                records.append(plan.record)
        errors = collections.Counter(e.split(":", 1)[0] for r in records for e in r.errors)
        print(f"prompted conductor on {args.endpoint} ({'JSON-schema-constrained' if json_schema else 'free text'}), {args.n} plans: "
              f"needed a resample {sum(r.attempts > 1 for r in records)}, fell back {sum(r.fallback is not None for r in records)}, "
              f"rejected attempts by error {dict(errors) or 'none'}, median {statistics.median(seconds):.1f} s per plan")


async def main(args) -> None:
    if args.endpoint:
        return await endpoint_plans(args)
    task = load_task("basic_arithmetic", limit=args.n + 1, seed=args.seed)  # the first: warm-up, not counted
    questions = [task.text(q) for q in task.questions]
    pools = {mode: Pool(spec_for(args, mode)) for mode in MODES}
    policies, times, seen = {}, collections.defaultdict(float), {}
    for mode in MODES:
        policies[mode] = make_policy("conductor")
        instrument(policies[mode], pools[mode].conductor_backend(), times, seen)
    rows: dict[str, list[dict]] = {mode: [] for mode in MODES}
    print(f"{'':11} " + " ".join(f"{p:>7}" for p in PHASES) + f" {'total':>7} {'limit':>7} {'dec-lim':>7}   (ms; dec-lim: decode minus the limit's, the grammar's cost before, with drafts' gain after)")
    for i, question in enumerate(questions):
        for mode in MODES:
            spec = pools[mode].spec
            with as_before(spec) if mode == "before" else _nothing():
                row = await plan_once(policies[mode], pools[mode], question, args.seed + i, times, seen)
            if i:
                rows[mode].append(row)
            show(mode if i else "warmup", i, row)
    report(args, rows)
    for pool in pools.values():
        await pool.aclose()


@contextmanager
def _nothing():
    yield


def report(args, rows: dict[str, list[dict]]) -> None:
    print(f"\nmedians over {args.n} plans after one warm-up plan each (ms), the machine as it was:")
    print(f"{'mode':8}" + " ".join(f"{p:>8}" for p in PHASES) + f" {'median':>8} {'p95':>8} {'limit':>8} {'x limit':>8}")
    for mode, mode_rows in rows.items():
        s = summary(mode, mode_rows)
        print(f"{mode:8}" + " ".join(f"{s[p] * 1000:8.1f}" for p in PHASES)
              + f" {s['total'] * 1000:8.1f} {s['p95'] * 1000:8.1f} {s['limit'] * 1000:8.1f} {s['ratio']:8.2f}")
    for mode in MODES[1:]:
        pairs = list(zip(rows["before"], rows[mode]))
        print(f"identical plans, before and {mode}: {sum(a['record'].raw == b['record'].raw for a, b in pairs)} of {args.n}")
        for i, (a, b) in enumerate(pairs, 1):
            if a["record"].raw != b["record"].raw:
                print(f"q{i} before:\n{a['record'].raw}\nq{i} {mode}:\n{b['record'].raw}")
    for mode, mode_rows in rows.items():
        records = [r["record"] for r in mode_rows]
        errors = collections.Counter(e.split(":", 1)[0] for r in records for e in r.errors)
        print(f"{mode}: plans that needed a resample {sum(r.attempts > 1 for r in records)} of {args.n}, fell back "
              f"{sum(r.fallback is not None for r in records)} of {args.n}; rejected attempts by error: {dict(errors) or 'none'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=13, help="questions to plan (after one warm-up question)")
    parser.add_argument("--seed", type=int, default=0, help="task generator seed; question i plans with seed + i")
    parser.add_argument("--timeout", type=float, default=3600.0, help="the conductor backend's timeout_s (the pool's: 300)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--untrained", action="store_true", help="plan with the prompted backend, not the shipped trained conductor")
    which.add_argument("--conductor", help="a trained conductor's folder to plan with instead of the shipped one")
    which.add_argument("--endpoint", help="an OpenAI-compatible server (http://HOST:PORT): its prompted conductor with and without the JSON schema")
    asyncio.run(main(parser.parse_args()))
