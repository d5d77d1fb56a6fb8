"""A durable local store of Runs: SQLite (WAL) in the user's data dir.

A run is written when it starts and again as it progresses and when it ends, so a crash mid-run still
leaves its plan and finished steps on disk, and a viewer can follow a run in progress.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Optional

import platformdirs

from .records import Run

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    question TEXT NOT NULL,
    policy TEXT NOT NULL,
    pool TEXT NOT NULL,
    status TEXT NOT NULL,
    final_answer TEXT NOT NULL,
    steps INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    wall_s REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at DESC);
"""


def default_trace_path() -> Path:
    override = os.environ.get("OPENCONDUCTOR_TRACES")
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("openconductor")) / "traces.sqlite3"


class TraceNotFound(KeyError):
    pass


class AmbiguousTrace(TraceNotFound):
    """A prefix that matches several runs; ``candidates`` are their list rows (newest first)."""

    def __init__(self, message: str, candidates: list[dict]):
        super().__init__(message)
        self.candidates = candidates


class TraceStore:
    def __init__(self, path: Optional[str | Path] = None):
        self.path = Path(path) if path is not None else default_trace_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
        self._db.executescript(SCHEMA)

    def save(self, run: Run) -> None:
        totals = run.totals
        row = (
            run.id, run.created_at, run.question, run.policy, run.pool, run.status, run.final_answer,
            len(run.steps), totals.calls, totals.usage.total_tokens, totals.usage.cost_usd, totals.wall_s,
            run.model_dump_json(),
        )
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", row)

    def get(self, run_id: str) -> Run:
        """The run with this id, or with the one id that starts with it (as with git hashes)."""
        pattern = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._lock:
            row = self._db.execute("SELECT record FROM runs WHERE id = ?", (run_id,)).fetchone()
            ids = [] if row is not None else [r[0] for r in self._db.execute(
                "SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at DESC LIMIT 11", (pattern,))]
            if len(ids) == 1:
                row = self._db.execute("SELECT record FROM runs WHERE id = ?", (ids[0],)).fetchone()
        if row is not None:
            return Run.model_validate_json(row[0])
        if len(ids) > 1:
            count = f"{len(ids)}" if len(ids) <= 10 else "more than 10 (the 10 newest below)"
            raise AmbiguousTrace(f"{run_id!r} starts {count} trace ids", self.list(limit=10, ids=ids[:10]))
        raise TraceNotFound(f"no trace with id {run_id!r} in {self.path}")

    def list(self, limit: int = 20, offset: int = 0, *, api_key: Optional[str] = None, ids: Optional[list[str]] = None) -> list[dict]:
        """Newest first; with ``api_key``, only runs whose metadata names that server key; with ``ids``, only those."""
        where, args = ("WHERE json_extract(record, '$.metadata.api_key') = ?", (api_key,)) if api_key is not None else ("", ())
        if ids is not None:
            where, args = f"WHERE id IN ({','.join('?' * len(ids))})", tuple(ids)
        with self._lock:
            cursor = self._db.execute(
                "SELECT id, created_at, question, policy, pool, status, final_answer, steps, calls, tokens, cost_usd, wall_s "
                f"FROM runs {where} ORDER BY created_at DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            )
            columns = [c[0] for c in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]

    def handler(self):
        """An executor event handler that saves the run at start, per finished step and at the end."""

        def on_event(event) -> None:
            if event.type in ("run_started", "plan", "step_finished", "run_finished") and event.run.depth == 0:
                self.save(event.run)

        return on_event

    def close(self) -> None:
        with self._lock:
            self._db.close()
