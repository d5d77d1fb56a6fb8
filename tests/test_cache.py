"""Response cache: hits and misses, key sensitivity, exact replay of Runs, concurrency (simulated workers)."""

import asyncio
import threading

import pytest

from openconductor.cache import ResponseCache, cache_key
from openconductor.executor import solve
from openconductor.policies import make_policy
from openconductor.pool import Pool, PoolSpec, WorkerSpec
from openconductor.records import Completion, Usage

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def spec(**options) -> PoolSpec:
    workers = [
        WorkerSpec(name="a", provider="simulated", model="sim-a", price_input_per_m=1.0, price_output_per_m=2.0, options={"latency_s": 0.01, **options}),
        WorkerSpec(name="b", provider="simulated", model="sim-b", temperature=0.9, options={"seed": 1}),
    ]
    return PoolSpec(name="cache-test", workers=workers, strongest="a")


async def test_miss_then_hit_returns_the_original_completion(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    async with Pool(spec(), cache=cache) as pool:
        worker = pool[0]
        first, attempts = await worker.call(MESSAGES, seed=1)
        second, attempts2 = await worker.call(MESSAGES, seed=1)
        assert worker.provider.calls == 1
    assert not first.cached and second.cached
    assert second.text == first.text and second.usage == first.usage and second.latency_s == first.latency_s
    assert second.usage.cost_usd == pytest.approx(first.usage.cost_usd) and first.usage.cost_usd > 0
    assert attempts == attempts2 == 1
    assert cache.stats() == {"hits": 1, "misses": 1, "entries": 1}


async def test_a_hit_streams_its_text_once(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    async with Pool(spec(), cache=cache) as pool:
        await pool[0].call(MESSAGES, seed=1)
        pieces = []
        completion, _ = await pool[0].call(MESSAGES, seed=1, on_token=pieces.append)
    assert "".join(pieces) == completion.text


@pytest.mark.parametrize(
    "change",
    [
        {"messages": [{"role": "user", "content": "What is 2 + 3?"}]},
        {"temperature": 0.7},
        {"seed": 2},
        {"seed": None},
        {"max_tokens": 17},
        {"grammar": 'root ::= "x"'},
    ],
)
def test_every_sampling_input_is_in_the_key(change):
    w = spec().workers[0]
    base = dict(messages=MESSAGES, max_tokens=64, temperature=0.2, grammar=None, seed=1)
    changed = dict(base, **change)
    assert cache_key(w, **base) == cache_key(w, **dict(base))
    assert cache_key(w, **base) != cache_key(w, **changed)


def test_model_and_provider_options_are_in_the_key_but_the_worker_name_is_not():
    w = spec().workers[0]
    args = dict(max_tokens=64, temperature=0.2, grammar=None, seed=1)
    assert cache_key(w, MESSAGES, **args) != cache_key(w.model_copy(update={"model": "other"}), MESSAGES, **args)
    assert cache_key(w, MESSAGES, **args) != cache_key(w.model_copy(update={"options": {"x": 1}}), MESSAGES, **args)
    assert cache_key(w, MESSAGES, **args) == cache_key(w.model_copy(update={"name": "renamed"}), MESSAGES, **args)


async def test_different_temperature_or_seed_misses(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    async with Pool(spec(), cache=cache) as pool:
        w = pool[0]
        await w.call(MESSAGES, seed=1)
        await w.call(MESSAGES, seed=2)
        await w.call(MESSAGES, seed=1, temperature=0.9)
        await w.call(MESSAGES + [{"role": "user", "content": "more"}], seed=1)
        assert w.provider.calls == 4
    assert cache.stats()["hits"] == 0 and len(cache) == 4


def _comparable(run) -> dict:
    """A Run without what legitimately differs between two executions (ids, clocks)."""
    data = run.model_dump(exclude={"id", "created_at"})
    data["totals"].pop("wall_s")
    for step in data["steps"]:
        for key in ("started_at", "finished_at"):
            step.pop(key)
    data["plan"].pop("latency_s")
    return data


async def test_replay_gives_identical_runs_without_calling_workers(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    policies = [make_policy("moa"), make_policy("self-reflection", rounds=2), make_policy("random")]
    async with Pool(spec(jitter_s=0.01), cache=cache) as pool:
        first = [await solve("Name a prime.", p, pool, seed=5) for p in policies]
        calls = sum(w.provider.calls for w in pool.workers)
    assert calls > 0
    async with Pool(spec(jitter_s=0.01), cache=ResponseCache(tmp_path / "c.sqlite3")) as pool:
        again = [await solve("Name a prime.", p, pool, seed=5) for p in policies]
        assert sum(w.provider.calls for w in pool.workers) == 0
    for a, b in zip(first, again):
        assert _comparable(a) == _comparable(b)
        assert a.totals.usage == b.totals.usage and a.totals.calls == b.totals.calls


async def test_concurrent_identical_calls_make_one_real_call(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    async with Pool(spec(), cache=cache) as pool:
        results = await asyncio.gather(*(pool[0].call(MESSAGES, seed=3) for _ in range(20)))
        assert pool[0].provider.calls == 1
    texts = {c.text for c, _ in results}
    assert len(texts) == 1 and sum(c.cached for c, _ in results) == 19


def test_threads_and_two_connections_share_one_file(tmp_path):
    path = tmp_path / "c.sqlite3"
    caches = [ResponseCache(path), ResponseCache(path)]
    errors = []

    def writer(n: int) -> None:
        try:
            cache = caches[n % 2]
            for i in range(50):
                key = f"k{n}-{i}"
                cache.put(key, "w", Completion(text=f"{n}:{i}", usage=Usage(input_tokens=i)))
                hit = cache.get(key)
                assert hit is not None and hit[0].text == f"{n}:{i}"
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(ResponseCache(path)) == 300


def test_first_writer_wins(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put("k", "w", Completion(text="first"))
    cache.put("k", "w", Completion(text="second"))
    assert cache.get("k")[0].text == "first"


async def test_failures_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    failing = PoolSpec(name="f", workers=[WorkerSpec(name="x", provider="simulated", max_retries=0, options={"fail_rate": 1.0})])
    from openconductor.pool import WorkerCallError

    async with Pool(failing, cache=cache) as pool:
        for _ in range(2):
            with pytest.raises(WorkerCallError):
                await pool[0].call(MESSAGES, seed=1)
        assert pool[0].provider.calls == 2
    assert len(cache) == 0
