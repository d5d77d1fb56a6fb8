"""Durable stores of Runs: SQLite (WAL) in the user's data dir by default, PostgreSQL for replicas.

A run is written when it starts and again as it progresses and when it ends, so a crash mid-run still
leaves its plan and finished steps on disk, and a viewer can follow a run in progress. Both backends
share one schema and one SQL dialect (``SQLTraceStore``); ``open_store`` picks one from a location (a
file path, or a ``postgresql://`` URL).

Every row names its owner (host, boot, process), and owners record a heartbeat, so a store can tell a
run that is still going from one whose process died: ``sweep_interrupted`` marks the latter
``error`` ("interrupted: ...") when a server starts and while it runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import platformdirs

from .records import Run

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    question TEXT NOT NULL,
    policy TEXT NOT NULL,
    pool TEXT NOT NULL,
    status TEXT NOT NULL,
    final_answer TEXT NOT NULL,
    steps BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    wall_s DOUBLE PRECISION NOT NULL,
    record TEXT NOT NULL,
    api_key TEXT,
    owner TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at DESC);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS owners (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
"""

# Created after the migration below (stores older than the api_key column get it first): a key's
# lookups and listings read only its own rows.
KEY_INDEX = "CREATE INDEX IF NOT EXISTS runs_key ON runs(api_key, created_at DESC)"

COLUMNS = ("id", "created_at", "question", "policy", "pool", "status", "final_answer", "steps", "calls", "tokens", "cost_usd",
           "wall_s", "record", "api_key", "owner")
LISTED = COLUMNS[:12]
UPSERT = (f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) ON CONFLICT (id) DO UPDATE SET "
          + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:]))

# Lone surrogates cannot be encoded as UTF-8 (SQLite, PostgreSQL) and NUL cannot be stored in
# PostgreSQL text: both become U+FFFD, so a run with them is still saved rather than lost.
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def storable(text: str) -> str:
    # encode() finds a lone surrogate and ``in`` a NUL in C at memory speed; the regex scan took 19 ms for a
    # 900 KB question on the event loop (issue 70), so it runs only where there is something to replace.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _UNSTORABLE.sub("\ufffd", text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


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


# ---------------------------------------------------------------------------------------------- owners


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def _start_ticks(pid: int) -> Optional[str]:
    """A running process's start time (Linux), which tells it from a later one that reused its pid;
    None when there is none, or it has exited and waits to be reaped (a zombie keeps its pid and start)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class Owner:
    """This process, as the owner of the runs it writes: ``host/boot/pid/start``."""

    host: str
    boot: str
    pid: int
    start: str

    @property
    def id(self) -> str:
        return f"{self.host}/{self.boot}/{self.pid}/{self.start}"

    @classmethod
    def current(cls) -> "Owner":
        return cls.of_process(os.getpid())

    @classmethod
    def of_process(cls, pid: int) -> "Owner":
        """A process on this machine (tests use it for a process they then kill)."""
        return cls(socket.gethostname(), _boot_id(), pid, _start_ticks(pid) or str(time.time()))

    @classmethod
    def parse(cls, owner_id: str) -> Optional["Owner"]:
        parts = owner_id.rsplit("/", 3)
        if len(parts) != 4 or not (parts[2].isascii() and parts[2].isdigit()):
            return None
        return cls(parts[0], parts[1], int(parts[2]), parts[3])

    def gone(self, here: "Owner") -> Optional[bool]:
        """True/False when this machine can tell whether the owner's process still runs; None otherwise."""
        if self.host != here.host:
            return None
        if self.boot != here.boot:
            return True  # the machine restarted since
        ticks = _start_ticks(self.pid)
        if ticks is not None or Path("/proc/self/stat").exists():
            return ticks != self.start
        try:  # no procfs: whether the pid exists is all there is to know
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def row(run: Run, owner: str) -> tuple:
    t = run.totals
    usage = t.usage
    api_key = run.metadata.get("api_key")
    return (run.id, run.created_at, storable(run.question), run.policy, run.pool, run.status, storable(run.final_answer),
            len(run.steps), t.calls, usage.total_tokens, usage.cost_usd, t.wall_s, record_json(run),
            api_key if isinstance(api_key, str) else None, owner)


def record_json(run: Run) -> str:
    """The run as JSON text that every backend stores (pydantic escapes NUL; it refuses lone surrogates)."""
    try:
        return run.model_dump_json()
    except ValueError:  # lone surrogates in a str
        import json

        return storable(json.dumps(run.model_dump(mode="json"), ensure_ascii=False))


# ----------------------------------------------------------------------------------------- the store


class SQLTraceStore(ABC):
    """What every backend shares: the schema, upserts, listing, prefix lookup, owners and the sweep."""

    location: str
    stale_after_s: float = 60.0  # an owner on another host that has not beaten for this long is gone

    def __init__(self) -> None:
        self.owner = Owner.current()

    @abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor inside one transaction (committed on exit)."""

    @abstractmethod
    def _sql(self, sql: str) -> str:
        """SQL written with ``?`` placeholders in this backend's paramstyle."""

    @abstractmethod
    def close(self) -> None: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor inside one transaction, for tables kept beside the runs (the server's quotas)."""
        return self._transaction()

    def sql(self, sql: str) -> str:
        """SQL written with ``?`` placeholders, in this backend's paramstyle."""
        return self._sql(sql)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._transaction() as cur:
            cur.execute(self._sql(sql), tuple(args))
            return list(cur.fetchall())

    # ------------------------------------------------------------------------------------ writing

    def save(self, run: Run) -> None:
        self.write([row(run, self.owner.id)])

    def write(self, rows: Sequence[tuple]) -> None:
        """Upsert rows built by ``row()`` in one transaction, and beat this owner's heartbeat."""
        if not rows:
            return
        with self._transaction() as cur:
            cur.executemany(self._sql(UPSERT), list(rows))
            self._beat(cur)

    def heartbeat(self) -> None:
        with self._transaction() as cur:
            self._beat(cur)

    def _beat(self, cur) -> None:
        cur.execute(self._sql("INSERT INTO owners (id, host, heartbeat_at) VALUES (?, ?, ?) "
                              "ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"),
                    (self.owner.id, self.owner.host, time.time()))

    # ------------------------------------------------------------------------------------ reading

    def get(self, run_id: str, *, api_key: Optional[str] = None) -> Run:
        """The run with this id, or with the one id that starts with it (as with git hashes). With
        ``api_key``, only that key's runs are looked at, in the queries themselves: another key's run
        is not found by the same path, in the same time, as an id that matches nothing."""
        scope, key = (" AND api_key = ?", (api_key,)) if api_key is not None else ("", ())
        rows = self._query(f"SELECT record FROM runs WHERE id = ?{scope}", (run_id, *key))
        if rows:
            return Run.model_validate_json(rows[0][0])
        prefix = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        ids = [r[0] for r in self._query(f"SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'{scope} ORDER BY created_at DESC LIMIT 11",
                                         (prefix, *key))]
        if len(ids) == 1:
            return Run.model_validate_json(self._query("SELECT record FROM runs WHERE id = ?", (ids[0],))[0][0])
        if len(ids) > 1:
            count = f"{len(ids)}" if len(ids) <= 10 else "more than 10 (the 10 newest below)"
            raise AmbiguousTrace(f"{run_id!r} starts {count} trace ids", self.list(limit=10, ids=ids[:10]))
        raise TraceNotFound(f"no trace with id {run_id!r} in {self.location}")

    def list(self, limit: int = 20, offset: int = 0, *, api_key: Optional[str] = None, ids: Optional[list[str]] = None) -> list[dict]:
        """Newest first; with ``api_key``, only runs whose metadata names that server key; with ``ids``, only those."""
        where, args = ("WHERE api_key = ?", (api_key,)) if api_key is not None else ("", ())
        if ids is not None:
            where, args = f"WHERE id IN ({', '.join('?' * len(ids))})", tuple(ids)
        rows = self._query(f"SELECT {', '.join(LISTED)} FROM runs {where} ORDER BY created_at DESC LIMIT ? OFFSET ?", (*args, limit, offset))
        return [dict(zip(LISTED, r)) for r in rows]

    def handler(self):
        """An executor event handler that saves the run at start, per finished step and at the end."""

        def on_event(event) -> None:
            if event.type in ("run_started", "plan", "step_finished", "run_finished") and event.run.depth == 0:
                self.save(event.run)

        return on_event

    # ----------------------------------------------------------------------------- interruptions

    def sweep_interrupted(self, keep: frozenset[str] = frozenset()) -> list[str]:
        """Mark runs whose process is gone as interrupted (status ``error``); returns their ids.

        A run is gone when its owner is unknown, is a dead process on this machine (or a machine that
        rebooted), or on another host has not beaten its heartbeat for ``stale_after_s``. ``keep``:
        ids of runs this process is running.
        """
        running = self._query("SELECT id, owner FROM runs WHERE status = 'running'")
        if not running:
            return []
        beats = dict(self._query("SELECT id, heartbeat_at FROM owners"))
        now, swept = time.time(), []
        for run_id, owner_id in running:
            if run_id in keep or owner_id == self.owner.id:
                continue
            owner = Owner.parse(owner_id or "")
            gone = owner.gone(self.owner) if owner is not None else True
            if gone is None:
                gone = now - beats.get(owner_id, 0.0) > self.stale_after_s
            if gone and self._mark_interrupted(run_id, owner_id):
                swept.append(run_id)
        return swept

    def _mark_interrupted(self, run_id: str, owner_id: Optional[str]) -> bool:
        rows = self._query("SELECT record FROM runs WHERE id = ? AND status = 'running'", (run_id,))
        if not rows:
            return False  # it finished meanwhile
        run = Run.model_validate_json(rows[0][0])
        reason = f"interrupted: the process running it ({owner_id or 'unknown'}) stopped before it finished"
        run.status, run.error = "error", reason
        for step in run.steps:
            if step.status in ("pending", "running"):
                step.status, step.error = "error", reason
        with self._transaction() as cur:  # only if still running: its owner may have saved it meanwhile
            cur.execute(self._sql("UPDATE runs SET status = ?, record = ? WHERE id = ? AND status = 'running'"),
                        ("error", record_json(run), run_id))
        return True


class TraceStore(SQLTraceStore):
    """SQLite (WAL), thread-safe (one connection under a lock); several processes may share the file.

    The database file is created readable and writable by its owner only (its WAL files follow).
    """

    def __init__(self, path: Optional[str | Path] = None):
        super().__init__()
        self.path = Path(path) if path is not None else default_trace_path()
        self.location = str(self.path)
        self._lock = threading.Lock()
        self._db = open_sqlite(self.path, SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Stores written before the api_key/owner columns existed get them (api_key filled from the record)."""
        have = {r[1] for r in self._db.execute("PRAGMA table_info(runs)")}
        if "api_key" not in have:
            with self._lock:
                self._db.execute("ALTER TABLE runs ADD COLUMN api_key TEXT")
                self._db.execute("UPDATE runs SET api_key = json_extract(record, '$.metadata.api_key')")
        if "owner" not in have:
            with self._lock:
                self._db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")
        with self._lock:
            self._db.execute(KEY_INDEX)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def _sql(self, sql: str) -> str:
        return sql

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_sqlite(path: Path, schema: str) -> sqlite3.Connection:
    """A WAL-mode SQLite database at ``path`` for several threads and processes, created owner-only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # SQLite gives its -wal/-shm files the same mode
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
    db.executescript(schema)
    return db


class PostgresTraceStore(SQLTraceStore):
    """PostgreSQL through a small psycopg connection pool: the store several replicas share."""

    def __init__(self, url: str, *, max_connections: int = 4):
        try:
            import psycopg_pool
        except ImportError:
            raise RuntimeError("a postgresql:// trace store needs the scale extra: pip install 'openconductor[scale]'") from None
        super().__init__()
        self.location = re.sub(r"//[^@/]*@", "//***@", url)  # never print a password
        self._pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=max_connections, open=True, timeout=30)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(715017)")  # replicas starting together create the schema once
            conn.execute(SCHEMA)
            conn.execute(KEY_INDEX)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def close(self) -> None:
        self._pool.close()


def open_store(location: Optional[str | Path] = None) -> SQLTraceStore:
    """The store at ``location``: a ``postgresql://`` URL or a SQLite file path (default: the user's)."""
    location = location if location is not None else os.environ.get("OPENCONDUCTOR_TRACES")
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        return PostgresTraceStore(location)
    return TraceStore(location)


class TraceWriter:
    """Saves runs on a background thread, so the event loop never waits for the database.

    ``save`` serialises the run at once (the thread never reads a Run the loop is changing) and returns;
    saves of one run queued before the thread gets to them are written once, in their latest state, and
    each batch is one transaction. ``flush`` waits until everything saved so far is written.
    """

    def __init__(self, store: SQLTraceStore):
        self.store = store
        self._pending: dict[str, tuple] = {}
        self._waiters: list[Future] = []  # one per save in the pending batch: True once written, False if the write failed
        self._cond = threading.Condition()
        self._submitted = self._written = 0
        self._closed = False
        self.failures = 0
        self._thread = threading.Thread(target=self._loop, name="trace-writer", daemon=True)
        self._thread.start()

    def save(self, run: Run) -> "Future[bool]":
        """Queue ``run`` (serialised now); the future says when its batch is written (True) or failed (False)."""
        record = row(run, self.store.owner.id)
        written: Future[bool] = Future()
        with self._cond:
            self._pending[run.id] = record
            self._waiters.append(written)
            self._submitted += 1
            self._cond.notify_all()
        return written

    def _loop(self) -> None:
        import logging

        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending and self._closed:
                    return
                batch, self._pending, upto = self._pending, {}, self._submitted
                waiters, self._waiters = self._waiters, []
            ok = True
            try:
                self.store.write(list(batch.values()))
            except Exception:  # the answers matter more than their traces; say so loudly, keep going
                ok = False
                self.failures += 1
                logging.getLogger(__name__).exception("could not save %d trace(s) to %s", len(batch), self.store.location)
            for waiter in waiters:
                waiter.set_result(ok)
            with self._cond:
                self._written = upto
                self._cond.notify_all()

    def flush(self, timeout: Optional[float] = 30.0) -> bool:
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(lambda: self._written >= target, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
