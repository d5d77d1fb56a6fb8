"""A response cache for worker calls: SQLite (WAL), keyed by everything that decides the output.

Two kinds of key (``ResponseCache(match=...)``):

* ``"exact"`` (the default): a hash of (provider, model, base URL, provider options, the full
  messages, max_tokens, temperature, top_p, grammar, seed).
* ``"context"`` (the replay store for training): the same, except that a worker message built by the
  executor is keyed by its *content* — the overall task, the visible earlier steps' subtasks and
  responses in order, and the step's own subtask — without the agent ids that label those steps
  (which change when a plan numbers or orders the pool differently) and without the fixed preamble
  (its text is hashed in as a version instead). Nothing else is normalised: the question, each
  subtask and each response must match character for character (after stripping surrounding
  whitespace), so a replayed answer is always an answer to the same question, the same context and
  the same subtask, at the same sampling settings (and seed, unless ``ignore_seed=True``). Tool
  workers key on what decides their output: the ``python`` worker on the program it found and its
  limits (not on sampling settings, which it ignores), the ``retrieval`` worker on its query.

A hit returns the stored Completion with ``cached=True`` and its
ORIGINAL usage, latency and cost, so a Run replayed from the cache reports exactly what the first run
did (and so an eval table does not change with cache state); the money actually spent on a re-run is
the cache's ``misses`` only. Sampling without a seed is cached too: the same call returns the same
sample, which is what makes a re-run replayable — pass distinct seeds to get distinct samples.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

import platformdirs

from . import worker_message
from .spec import outcome_options
from .records import Completion

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    worker TEXT NOT NULL,
    model TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    completion TEXT NOT NULL
);
"""


def default_cache_path() -> Path:
    return Path(platformdirs.user_cache_dir("openconductor")) / "responses.sqlite3"


def model_identity(model: Optional[str]) -> Any:
    """The model a key names: its reference, and for local weights (a file or a checkpoint dir) their
    files' sizes and modification times, so a model retrained into the same path is a new model, not a
    cache hit of the old one. Names that are not local paths (API models, packaged GGUFs) stay as is."""
    if not model:
        return model
    path = Path(model).expanduser()
    try:
        files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else []
        stamp = [(f.name, st.st_size, st.st_mtime_ns) for f in files for st in (f.stat(),)]
    except OSError:  # unreadable: the reference alone
        return model
    return [model, stamp] if stamp else model


def cache_key(spec: Any, messages: list[dict], *, max_tokens: int, temperature: float, grammar: Optional[str], seed: Optional[int]) -> str:
    """A stable hash of one call. ``spec`` is a WorkerSpec; its name is left out (renaming is free)."""
    payload = {
        "provider": spec.provider,
        "model": model_identity(spec.model),
        "base_url": spec.base_url,
        "options": outcome_options(spec.options),
        "top_p": spec.top_p,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "grammar": grammar,
        "seed": seed,
    }
    return _digest(payload)


def _digest(payload: dict) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def worker_context(messages: list[dict]) -> Optional[dict]:
    """The content of a worker message built by the executor, without agent ids; None for other calls."""
    context = worker_message.parse_rendered(messages)
    if context is None:
        return None
    return {
        "preamble": hashlib.sha256(worker_message.PREAMBLE.encode()).hexdigest()[:16],
        "question": context.question.strip(),
        "seen": [[subtask.strip(), response.strip()] for _, subtask, response in context.earlier],
        "subtask": context.subtask.strip(),
    }


def context_key(
    spec: Any, provider: Any, messages: list[dict], *, max_tokens: int, temperature: float, grammar: Optional[str],
    seed: Optional[int], ignore_seed: bool = False,
) -> str:
    """The replay store's key (see the module docstring); falls back to ``cache_key`` for other calls."""
    tool_key = getattr(provider, "replay_key", None)
    own = tool_key(messages) if tool_key is not None else None
    if own is not None:  # a deterministic tool: its own inputs decide its output
        return _digest({"provider": spec.provider, "options": outcome_options(spec.options), "tool": own})
    context = worker_context(messages)
    if context is None:
        return cache_key(spec, messages, max_tokens=max_tokens, temperature=temperature, grammar=grammar, seed=None if ignore_seed else seed)
    payload = {
        "provider": spec.provider, "model": model_identity(spec.model), "base_url": spec.base_url, "options": outcome_options(spec.options),
        "top_p": spec.top_p, "context": context, "max_tokens": max_tokens, "temperature": temperature,
        "grammar": grammar, "seed": None if ignore_seed else seed,
    }  # fmt: skip
    return _digest(payload)


class ResponseCache:
    """Thread- and process-safe (one connection under a lock; WAL lets processes share the file).

    ``match``: "exact" or "context" (the replay store, see the module docstring). The async methods
    (``aget``/``aput``) run SQLite in a thread, so a slow disk or a busy file never blocks the event loop.
    """

    def __init__(self, path: Optional[str | Path] = None, *, match: str = "exact", ignore_seed: bool = False):
        if match not in ("exact", "context"):
            raise ValueError(f"cache match must be 'exact' or 'context', got {match!r}")
        self.match, self.ignore_seed = match, ignore_seed
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self.hits = 0
        self.misses = 0
        self.per_worker: dict[str, list[int]] = {}  # worker name -> [hits, misses]
        self._inflight: dict[str, asyncio.Lock] = {}  # grows with distinct calls; fine per process

    def lock(self, key: str) -> asyncio.Lock:
        """Identical calls in flight at once wait for the first, then read its entry (one real call)."""
        # Keyed by event loop too: an asyncio.Lock belongs to the loop it first waited on.
        return self._inflight.setdefault(f"{id(asyncio.get_running_loop())}:{key}", asyncio.Lock())

    def key(self, spec: Any, provider: Any, messages: list[dict], **sampling: Any) -> str:
        """The key of one call under this cache's ``match``."""
        if self.match == "context":
            return context_key(spec, provider, messages, ignore_seed=self.ignore_seed, **sampling)
        if self.ignore_seed:
            sampling = dict(sampling, seed=None)
        return cache_key(spec, messages, **sampling)

    def get(self, key: str, worker: str = "") -> Optional[tuple[Completion, int]]:
        """(completion marked cached, attempts the original call took), or None on a miss."""
        with self._lock:
            row = self._db.execute("SELECT completion, attempts FROM responses WHERE key = ?", (key,)).fetchone()
            counts = self.per_worker.setdefault(worker, [0, 0])
            if row is None:
                self.misses += 1
                counts[1] += 1
                return None
            self.hits += 1
            counts[0] += 1
        completion = Completion.model_validate_json(row[0])
        completion.cached = True
        return completion, int(row[1])

    def put(self, key: str, worker: str, completion: Completion, attempts: int = 1) -> None:
        stored = completion.model_copy(update={"cached": False})
        with self._lock:
            # First writer wins (another process may have stored the same call meanwhile).
            self._db.execute(
                "INSERT OR IGNORE INTO responses VALUES (?,?,?,?,?,?)",
                (key, time.time(), worker, completion.model or "", attempts, stored.model_dump_json()),
            )

    async def aget(self, key: str, worker: str = "") -> Optional[tuple[Completion, int]]:
        return await asyncio.to_thread(self.get, key, worker)

    async def aput(self, key: str, worker: str, completion: Completion, attempts: int = 1) -> None:
        await asyncio.to_thread(self.put, key, worker, completion, attempts)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self)}

    def metrics(self) -> dict[str, Any]:
        """stats() plus the hit rate, overall and per worker, and the key kind."""
        def rate(hits: int, misses: int) -> float:
            return round(hits / (hits + misses), 4) if hits + misses else 0.0

        with self._lock:
            workers = {name: {"hits": h, "misses": m, "hit_rate": rate(h, m)} for name, (h, m) in sorted(self.per_worker.items())}
        return {**self.stats(), "hit_rate": rate(self.hits, self.misses), "match": self.match, "ignore_seed": self.ignore_seed, "per_worker": workers}

    def close(self) -> None:
        with self._lock:
            self._db.close()
