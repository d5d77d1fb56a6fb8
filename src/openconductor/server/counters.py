"""Per-key counters: request rate (token bucket), requests in flight, and daily token/cost quotas.

``LocalCounters`` keeps rate and concurrency in this process and the quotas in a ``QuotaLedger``:
a table beside the runs in the trace store (SQLite or PostgreSQL), so a restart does not reset them
and every process sharing the store shares them. ``RedisCounters`` keeps all three in Redis, so every
server process and replica enforces one limit per key: admission is one atomic Lua script (bucket,
in-flight set and quota checked together), and each request in flight holds a lease that its process
renews; the leases of a process that dies expire after ``lease_s``, so its slots come back.

Quotas are **reserved** at admission, atomically: a request takes what its own budget allows (its
``max_tokens`` / ``max_cost_usd``) or, if less, what is left of the day, and its run is limited to
that; when it ends, what it used is charged and the rest given back. Requests running at once can
therefore never spend more than the quota together. A process that dies keeps its reservations
charged until the day ends (never an overspend, at worst an underspend).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from ..budget import Limits
from ..records import Usage
from ..traces import SQLTraceStore
from .auth import Key


class RateLimited(Exception):
    """Too many requests, too many at once, or a spent quota (429); ``retry_after`` in seconds."""

    def __init__(self, message: str, retry_after: float, code: str = "rate_limit_exceeded"):
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))
        self.code = code


RESERVED_RETRY_S = 5.0  # a quota held by requests in flight frees up when they end


@dataclass
class Admission:
    """A request let in: its lease, and what it reserved of its key's daily quotas (None: no quota)."""

    key: Key
    lease: str = ""  # the slot's id in Redis (in-process counters need none)
    day: str = ""  # the UTC day its reservation was taken from
    tokens: Optional[int] = None
    cost: Optional[float] = None
    squeezed: bool = False  # the reservation is smaller than it would be without other requests' reservations

    @property
    def reserved(self) -> bool:
        return self.tokens is not None or self.cost is not None

    def limits(self) -> Limits:
        """The reservation, as limits a request's own are tightened by."""
        return Limits(max_depth=10**6, max_calls=10**9, max_tokens=self.tokens, max_cost_usd=self.cost)


def has_quota(key: Key) -> bool:
    return key.tokens_per_day is not None or key.cost_usd_per_day is not None


def seconds_to_utc_midnight(now: float) -> float:
    day = datetime.fromtimestamp(now, timezone.utc)
    return 86400 - (day.hour * 3600 + day.minute * 60 + day.second)


def _day(now: float) -> str:
    return str(int(now // 86400))  # the UTC day, as days since the epoch


def _quota_error(key: Key, tokens: float, cost: float, now: float) -> Optional[RateLimited]:
    wait = seconds_to_utc_midnight(now)
    if key.tokens_per_day is not None and tokens >= key.tokens_per_day:
        return RateLimited(f"key {key.name!r} has used its {key.tokens_per_day} tokens for today (UTC)", wait, "insufficient_quota")
    if key.cost_usd_per_day is not None and cost >= key.cost_usd_per_day:
        return RateLimited(f"key {key.name!r} has used its ${key.cost_usd_per_day:g} for today (UTC)", wait, "insufficient_quota")
    return None


def _held(key: Key) -> RateLimited:
    return RateLimited(f"the rest of key {key.name!r}'s daily quota is reserved by its requests in flight; retry when they end",
                       RESERVED_RETRY_S, "quota_reserved")


def reservation(key: Key, want: Optional[Limits], used: tuple[float, float], held: tuple[float, float],
                now: float) -> tuple[Optional[int], Optional[float], bool]:
    """What a request of ``key`` reserves from its quotas, given what is used and what is held by others
    (tokens, cost): its own limit, or what is left if less; and whether the others' holds made it smaller.
    RateLimited when nothing is left."""
    spent = _quota_error(key, *used, now)
    if spent is not None:
        raise spent
    tokens = cost = None
    squeezed = False
    if key.tokens_per_day is not None:
        tokens = int(key.tokens_per_day - used[0] - held[0])
        if tokens < 1:
            raise _held(key)
        if want is not None and want.max_tokens is not None:
            tokens = min(tokens, want.max_tokens)
        squeezed = held[0] > 0 and tokens < min(key.tokens_per_day - used[0], want.max_tokens if want and want.max_tokens else math.inf)
    if key.cost_usd_per_day is not None:
        cost = key.cost_usd_per_day - used[1] - held[1]
        if cost <= 0:
            raise _held(key)
        if want is not None and want.max_cost_usd is not None:
            cost = min(cost, want.max_cost_usd)
        squeezed = squeezed or (held[1] > 0 and cost < min(key.cost_usd_per_day - used[1],
                                                            want.max_cost_usd if want and want.max_cost_usd else math.inf))
    return tokens, cost, squeezed


QUOTA_SCHEMA = """
CREATE TABLE IF NOT EXISTS quota_days (
    api_key TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    held_tokens BIGINT NOT NULL,
    held_cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (api_key, day)
)
"""


class QuotaLedger:
    """Each key's daily use and reservations, in a table of the trace store (blocking: call from a thread).

    A reservation is one transaction that first writes the key's row (a no-op update), which takes
    the row's lock in PostgreSQL and the database's write lock in SQLite, so two processes cannot
    both read the same remainder.
    """

    def __init__(self, store: SQLTraceStore):
        self.store = store
        with store.transaction() as cur:
            cur.execute(QUOTA_SCHEMA)

    def reserve(self, key: Key, want: Optional[Limits], now: float) -> Admission:
        day, sql = _day(now), self.store.sql
        with self.store.transaction() as cur:
            cur.execute(sql("INSERT INTO quota_days (api_key, day, tokens, cost_usd, held_tokens, held_cost_usd) "
                            "VALUES (?, ?, 0, 0, 0, 0) ON CONFLICT (api_key, day) DO NOTHING"), (key.name, day))
            cur.execute(sql("UPDATE quota_days SET tokens = tokens WHERE api_key = ? AND day = ?"), (key.name, day))
            cur.execute(sql("SELECT tokens, cost_usd, held_tokens, held_cost_usd FROM quota_days WHERE api_key = ? AND day = ?"),
                        (key.name, day))
            used_t, used_c, held_t, held_c = cur.fetchone()
            tokens, cost, squeezed = reservation(key, want, (used_t, used_c), (held_t, held_c), now)
            cur.execute(sql("UPDATE quota_days SET held_tokens = held_tokens + ?, held_cost_usd = held_cost_usd + ? "
                            "WHERE api_key = ? AND day = ?"), (tokens or 0, cost or 0.0, key.name, day))
        return Admission(key, day=day, tokens=tokens, cost=cost, squeezed=squeezed)

    def settle(self, admission: Admission, usage: Optional[Usage]) -> None:
        """Charge what the request used and give back its reservation."""
        used = usage or Usage()
        with self.store.transaction() as cur:
            cur.execute(self.store.sql("UPDATE quota_days SET tokens = tokens + ?, cost_usd = cost_usd + ?, "
                                       "held_tokens = held_tokens - ?, held_cost_usd = held_cost_usd - ? WHERE api_key = ? AND day = ?"),
                        (used.total_tokens, used.cost_usd, admission.tokens or 0, admission.cost or 0.0, admission.key.name, admission.day))

    def used(self, key: str, now: float) -> tuple[int, float]:
        """Tokens and cost charged to ``key`` today (reservations not included)."""
        with self.store.transaction() as cur:
            cur.execute(self.store.sql("SELECT tokens, cost_usd FROM quota_days WHERE api_key = ? AND day = ?"), (key, _day(now)))
            row = cur.fetchone()
        return (int(row[0]), float(row[1])) if row else (0, 0.0)


class Counters(ABC):
    @abstractmethod
    async def acquire(self, key: Key, want: Optional[Limits] = None) -> Admission:
        """Let one request of ``key`` in, reserving from its quotas what ``want`` allows (None: all that is
        left), or raise RateLimited."""

    @abstractmethod
    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        """The request ended: free its slot, charge what it used to the key's quota, give back the rest."""

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class _Bucket:
    tokens: float
    updated: float
    in_flight: int = 0


class LocalCounters(Counters):
    """Rate and concurrency in this process (a single event loop: no locks needed); quotas in ``ledger``."""

    def __init__(self, ledger: Optional[QuotaLedger] = None) -> None:
        self._state: dict[str, _Bucket] = {}
        self.ledger = ledger

    def _bucket(self, key: Key, now: float) -> _Bucket:
        b = self._state.get(key.name)
        if b is None:
            b = self._state[key.name] = _Bucket(tokens=key.burst, updated=now)
        return b

    async def acquire(self, key: Key, want: Optional[Limits] = None) -> Admission:
        now = time.monotonic()
        b = self._bucket(key, now)
        # Token bucket: refills at the key's rate, holds at most `burst` requests.
        b.tokens = min(key.burst, b.tokens + (now - b.updated) * key.rate_per_s)
        b.updated = now
        if b.in_flight >= key.max_concurrent:
            raise RateLimited(f"key {key.name!r} already has {b.in_flight} requests running (limit {key.max_concurrent})", 1.0)
        if b.tokens < 1.0:
            raise RateLimited(f"key {key.name!r} is over its request rate ({key.rate_per_s * 60:g}/min)", (1.0 - b.tokens) / key.rate_per_s)
        b.tokens -= 1.0
        b.in_flight += 1
        if not has_quota(key):
            return Admission(key)
        if self.ledger is None:
            raise RuntimeError("a key with a daily quota needs counters with a QuotaLedger (the server gives them its trace store)")
        try:
            return await asyncio.to_thread(self.ledger.reserve, key, want, time.time())
        except BaseException:  # refused (or failed): the slot and the rate token were not used
            b.in_flight -= 1
            b.tokens = min(key.burst, b.tokens + 1.0)
            raise

    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        b = self._bucket(admission.key, time.monotonic())
        b.in_flight = max(0, b.in_flight - 1)
        if admission.reserved and self.ledger is not None:
            await asyncio.to_thread(self.ledger.settle, admission, usage)


# One atomic admission. KEYS: bucket hash, in-flight lease set, quota hash (of the day). ARGV: rate/s,
# burst, max concurrent, lease id, lease seconds, tokens per day, cost per day, tokens and cost wanted
# (-1: none / all that is left). The reservation mirrors ``reservation()``: used >= quota is spent (3),
# used + held leaves nothing is held by requests in flight (4); a reservation made smaller by other
# requests' holds returns squeezed = 1.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local rate, burst, maxc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[2])
if inflight >= maxc then return {1, tostring(inflight)} end
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
if tokens < 1 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
  return {2, tostring((1 - tokens) / rate)}
end
local q = redis.call('HMGET', KEYS[3], 'tokens', 'cost', 'held_tokens', 'held_cost')
local used_tokens, used_cost = tonumber(q[1]) or 0, tonumber(q[2]) or 0
local held_tokens, held_cost = tonumber(q[3]) or 0, tonumber(q[4]) or 0
local tpd, cpd = tonumber(ARGV[6]), tonumber(ARGV[7])
local want_tokens, want_cost = tonumber(ARGV[8]), tonumber(ARGV[9])
if (tpd >= 0 and used_tokens >= tpd) or (cpd >= 0 and used_cost >= cpd) then
  return {3, tostring(used_tokens), tostring(used_cost)}
end
local rt, rc, squeezed = -1, -1, 0
if tpd >= 0 then
  rt = math.floor(tpd - used_tokens - held_tokens)
  if rt < 1 then return {4} end
  if want_tokens >= 0 and want_tokens < rt then rt = want_tokens end
  local alone = tpd - used_tokens
  if want_tokens >= 0 and want_tokens < alone then alone = want_tokens end
  if held_tokens > 0 and rt < alone then squeezed = 1 end
end
if cpd >= 0 then
  rc = cpd - used_cost - held_cost
  if rc <= 0 then return {4} end
  if want_cost >= 0 and want_cost < rc then rc = want_cost end
  local alone = cpd - used_cost
  if want_cost >= 0 and want_cost < alone then alone = want_cost end
  if held_cost > 0 and rc < alone then squeezed = 1 end
end
if rt >= 0 then redis.call('HINCRBY', KEYS[3], 'held_tokens', rt) end
if rc >= 0 then redis.call('HINCRBYFLOAT', KEYS[3], 'held_cost', tostring(rc)) end
if rt >= 0 or rc >= 0 then redis.call('EXPIRE', KEYS[3], 2 * 86400) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 60)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[4])
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5]) * 2)
return {0, tostring(rt), tostring(rc), squeezed}
"""


class RedisCounters(Counters):
    """Shared by every process and replica that points at the same Redis."""

    def __init__(self, url: str, *, prefix: str = "openconductor", lease_s: float = 60.0):
        try:
            import redis.asyncio as aioredis
        except ImportError:
            raise RuntimeError("shared counters need the scale extra: pip install 'openconductor[scale]'") from None
        self.redis = aioredis.from_url(url, decode_responses=True)
        self.prefix, self.lease_s = prefix, lease_s
        self._acquire = self.redis.register_script(ACQUIRE)
        self._leases: dict[str, Key] = {}  # held by this process, renewed while their requests run
        self._renewer: Optional[asyncio.Task] = None

    def _keys(self, key: Key, day: str) -> list[str]:
        base = f"{self.prefix}:key:{key.name}"
        return [f"{base}:bucket", f"{base}:inflight", f"{base}:quota:{day}"]

    async def start(self) -> None:
        await self.redis.ping()  # fail at start-up, not on the first request
        self._renewer = asyncio.create_task(self._renew_forever())

    async def acquire(self, key: Key, want: Optional[Limits] = None) -> Admission:
        now = time.time()
        admission = Admission(key, lease=uuid.uuid4().hex, day=_day(now))
        wanted = (-1 if want is None or want.max_tokens is None else want.max_tokens,
                  -1 if want is None or want.max_cost_usd is None else want.max_cost_usd)
        result = await self._acquire(keys=self._keys(key, admission.day), args=[
            key.rate_per_s, key.burst, key.max_concurrent, admission.lease, self.lease_s,
            -1 if key.tokens_per_day is None else key.tokens_per_day, -1 if key.cost_usd_per_day is None else key.cost_usd_per_day,
            *wanted])
        verdict = int(result[0])
        if verdict == 1:
            raise RateLimited(f"key {key.name!r} already has {result[1]} requests running (limit {key.max_concurrent})", 1.0)
        if verdict == 2:
            raise RateLimited(f"key {key.name!r} is over its request rate ({key.rate_per_s * 60:g}/min)", float(result[1]))
        if verdict == 3:
            tokens, cost = float(result[1]), float(result[2])
            raise _quota_error(key, tokens, cost, now) or RateLimited(f"key {key.name!r}: quota spent", 60, "insufficient_quota")
        if verdict == 4:
            raise _held(key)
        self._leases[admission.lease] = key
        tokens, cost = int(float(result[1])), float(result[2])
        admission.tokens = tokens if tokens >= 0 else None
        admission.cost = cost if cost >= 0 else None
        admission.squeezed = len(result) > 3 and int(result[3]) == 1
        return admission

    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        key = admission.key
        self._leases.pop(admission.lease, None)
        _bucket, inflight, quota = self._keys(key, admission.day)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(inflight, admission.lease)
            if admission.reserved:
                used = usage or Usage()
                pipe.hincrby(quota, "tokens", used.total_tokens)
                pipe.hincrbyfloat(quota, "cost", used.cost_usd)
                pipe.hincrby(quota, "held_tokens", -(admission.tokens or 0))
                pipe.hincrbyfloat(quota, "held_cost", -(admission.cost or 0.0))
                pipe.expire(quota, 2 * 86400)
            await pipe.execute()

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not self._leases:
                continue
            expiry = time.time() + self.lease_s  # Redis TIME and this clock agree to well under lease_s on one network
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for lease, key in list(self._leases.items()):
                        pipe.zadd(self._keys(key, "")[1], {lease: expiry}, xx=True)
                    await pipe.execute()
            except Exception:  # Redis away for a moment: the next round renews them
                import logging

                logging.getLogger(__name__).exception("could not renew %d lease(s)", len(self._leases))

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        await self.redis.aclose()


def make_counters(url: Optional[str], store: Optional[SQLTraceStore] = None) -> Counters:
    """Counters in Redis at ``url``, or in this process with the quotas in ``store``."""
    if url:
        return RedisCounters(url)
    return LocalCounters(QuotaLedger(store) if store is not None else None)
