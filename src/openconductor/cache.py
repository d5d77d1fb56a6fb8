"""A response cache for worker calls: SQLite (WAL), keyed by everything that decides the output.

The key is a hash of (provider, model, base URL, provider options, the full messages, max_tokens,
temperature, top_p, grammar, seed). A hit returns the stored Completion with ``cached=True`` and its
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


def cache_key(spec: Any, messages: list[dict], *, max_tokens: int, temperature: float, grammar: Optional[str], seed: Optional[int]) -> str:
    """A stable hash of one call. ``spec`` is a WorkerSpec; its name is left out (renaming is free)."""
    payload = {
        "provider": spec.provider,
        "model": spec.model,
        "base_url": spec.base_url,
        "options": spec.options,
        "top_p": spec.top_p,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "grammar": grammar,
        "seed": seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """Thread- and process-safe (one connection under a lock; WAL lets processes share the file)."""

    def __init__(self, path: Optional[str | Path] = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self.hits = 0
        self.misses = 0
        self._inflight: dict[str, asyncio.Lock] = {}  # grows with distinct calls; fine per process

    def lock(self, key: str) -> asyncio.Lock:
        """Identical calls in flight at once wait for the first, then read its entry (one real call)."""
        # Keyed by event loop too: an asyncio.Lock belongs to the loop it first waited on.
        return self._inflight.setdefault(f"{id(asyncio.get_running_loop())}:{key}", asyncio.Lock())

    def get(self, key: str) -> Optional[tuple[Completion, int]]:
        """(completion marked cached, attempts the original call took), or None on a miss."""
        with self._lock:
            row = self._db.execute("SELECT completion, attempts FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
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

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self)}

    def close(self) -> None:
        with self._lock:
            self._db.close()
