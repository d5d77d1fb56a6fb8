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


def test_a_model_retrained_into_the_same_path_is_a_new_key(tmp_path):
    """Local weights are keyed by their files, not only their path: a conductor re-exported into RUN/warmup
    must not be answered with the plans the previous model wrote there (this happened, 2026-11-25)."""
    import os

    from openconductor.cache import context_key

    path = tmp_path / "warmup"
    path.mkdir()
    (path / "conductor.gguf").write_bytes(b"old weights")
    w = WorkerSpec(name="c", provider="local_gguf", model=str(path / "conductor.gguf"))
    d = WorkerSpec(name="t", provider="transformers", model=str(path))
    args = dict(max_tokens=64, temperature=0.0, grammar=None, seed=1)
    before = cache_key(w, MESSAGES, **args), context_key(w, None, MESSAGES, **args), cache_key(d, MESSAGES, **args)
    assert before == (cache_key(w, MESSAGES, **args), context_key(w, None, MESSAGES, **args), cache_key(d, MESSAGES, **args))
    (path / "conductor.gguf").write_bytes(b"new weights, retrained")
    os.utime(path / "conductor.gguf", ns=(1, 1))
    after = cache_key(w, MESSAGES, **args), context_key(w, None, MESSAGES, **args), cache_key(d, MESSAGES, **args)
    assert all(a != b for a, b in zip(before, after))
    # Names that are not local files (API models, packaged GGUFs) key as before.
    named = WorkerSpec(name="q", provider="local_gguf", model="qwen2.5-coder-0.5b-instruct")
    assert cache_key(named, MESSAGES, **args) == cache_key(named.model_copy(), MESSAGES, **args)


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
        for key in ("started_at", "finished_at", "cached"):
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
        assert all(s.cached for s in b.steps) and not all(s.cached for s in a.steps)  # the trace says which
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


# ------------------------------------------------------------------------------ the replay store (context match)


def two_step(first: int, second: int, subtask: str = "Finish it."):
    from openconductor.policies.baselines import GivenWorkflow
    from openconductor.workflow import Step, Workflow

    return GivenWorkflow(Workflow((Step(first, "Draft it.", ()), Step(second, subtask, "all"))))


def sims(*names) -> PoolSpec:
    return PoolSpec(name="replay", workers=[WorkerSpec(name=n, provider="simulated", model=f"sim-{n}") for n in names])


async def test_context_match_replays_across_pool_orderings_that_only_renumber_agents(tmp_path):
    for match, expected_hits in (("exact", 1), ("context", 2)):
        cache = ResponseCache(tmp_path / f"{match}.sqlite3", match=match)
        async with Pool(sims("a", "b"), cache=cache) as pool:
            first = await solve("q", two_step(0, 1), pool, seed=3)  # a drafts, b finishes seeing "Agent 0"
        async with Pool(sims("b", "a"), cache=cache) as pool:  # the same workers, renumbered
            second = await solve("q", two_step(1, 0), pool, seed=3)  # b finishes seeing "Agent 1"
        assert "Agent 0" in first.steps[1].messages[0]["content"] and "Agent 1" in second.steps[1].messages[0]["content"]
        assert cache.hits == expected_hits, match
        if match == "context":
            assert second.steps[1].output == first.steps[1].output and second.final_answer == first.final_answer


@pytest.mark.parametrize(
    "question,subtask,draft",
    [("q2", "Finish it.", None), ("q", "Finish it!", None), ("q", "Finish  it.", None), ("q", "Finish it.", "other draft")],
)
async def test_context_match_never_serves_a_different_question_subtask_or_context(tmp_path, question, subtask, draft):
    from openconductor.policies.baselines import GivenWorkflow
    from openconductor.workflow import Step, Workflow

    cache = ResponseCache(tmp_path / "c.sqlite3", match="context")
    async with Pool(sims("a", "b"), cache=cache) as pool:
        await solve("q", two_step(0, 1), pool, seed=3)
        hits = cache.hits
        if draft is None:
            await solve(question, two_step(0, 1, subtask), pool, seed=3)
            assert cache.hits == hits + (1 if question == "q" else 0)  # the draft step (same call) may hit; the finish never
        else:
            # A different draft (another worker wrote it) in front of the same subtask: the finish misses.
            await solve("q", GivenWorkflow(Workflow((Step(1, "Draft it.", ()), Step(1, "Finish it.", "all")))), pool, seed=3)
            assert cache.hits == hits


async def test_context_match_keeps_seeds_apart_unless_told(tmp_path):
    for ignore_seed, hits in ((False, 0), (True, 1)):
        cache = ResponseCache(tmp_path / f"s{ignore_seed}.sqlite3", match="context", ignore_seed=ignore_seed)
        async with Pool(sims("a"), cache=cache) as pool:
            await pool[0].call(MESSAGES, seed=1)
            await pool[0].call(MESSAGES, seed=2)
        assert cache.hits == hits


async def test_the_python_tool_replays_by_program_whatever_the_wording(tmp_path):
    from openconductor.policies.baselines import GivenWorkflow
    from openconductor.workflow import Step, Workflow

    cache = ResponseCache(tmp_path / "c.sqlite3", match="context")
    spec = PoolSpec(name="t", workers=[WorkerSpec(name="python", provider="python", options={"wall_s": 5})])
    code = "```python\nprint(6 * 7)\n```"
    async with Pool(spec, cache=cache) as pool:
        one = await solve("q", GivenWorkflow(Workflow((Step(0, f"Run this: {code}", ()),))), pool, seed=1)
        two = await solve("another question", GivenWorkflow(Workflow((Step(0, f"Execute {code}", ()),))), pool, seed=9)
        three = await solve("q", GivenWorkflow(Workflow((Step(0, "Run ```python\nprint(6 * 8)\n```", ()),))), pool, seed=1)
    assert one.final_answer == two.final_answer == "42" and three.final_answer == "48"
    assert cache.metrics()["per_worker"]["python"] == {"hits": 1, "misses": 2, "hit_rate": 0.3333}


async def test_cache_reads_and_writes_do_not_block_the_event_loop(tmp_path, monkeypatch):
    import time as _time

    cache = ResponseCache(tmp_path / "c.sqlite3")
    slow_put = cache.put

    def put(*args, **kwargs):
        _time.sleep(0.4)  # a slow disk
        return slow_put(*args, **kwargs)

    monkeypatch.setattr(cache, "put", put)
    ticks = []

    async def ticker():
        for _ in range(20):
            ticks.append(_time.perf_counter())
            await asyncio.sleep(0.02)

    async with Pool(spec(), cache=cache) as pool:
        await asyncio.gather(pool[1].call(MESSAGES, seed=1), ticker())
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.3, gaps  # the loop kept running while SQLite was busy


async def test_metrics_give_hit_rates_overall_and_per_worker(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite3")
    async with Pool(spec(), cache=cache) as pool:
        for _ in range(3):
            await pool[0].call(MESSAGES, seed=1)
        await pool[1].call(MESSAGES, seed=1)
    m = cache.metrics()
    assert (m["hits"], m["misses"], m["hit_rate"], m["match"]) == (2, 2, 0.5, "exact")
    assert m["per_worker"] == {"a": {"hits": 2, "misses": 1, "hit_rate": 0.6667}, "b": {"hits": 0, "misses": 1, "hit_rate": 0.0}}
    with pytest.raises(ValueError, match="cache match must be 'exact' or 'context'"):
        ResponseCache(tmp_path / "x.sqlite3", match="fuzzy")
