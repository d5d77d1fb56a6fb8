"""Per-key counters: request rate (token bucket), requests in flight, and daily token/cost quotas.

``LocalCounters`` keeps them in this process. ``RedisCounters`` keeps them in Redis, so every server
process and replica enforces one limit per key: admission is one atomic Lua script (bucket, in-flight
set and quota checked together), and each request in flight holds a lease that its process renews;
the leases of a process that dies expire after ``lease_s``, so its slots come back.
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
from .auth import Key


class RateLimited(Exception):
    """Too many requests, too many at once, or a spent quota (429); ``retry_after`` in seconds."""

    def __init__(self, message: str, retry_after: float, code: str = "rate_limit_exceeded"):
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))
        self.code = code


@dataclass
class Admission:
    """A request let in: its lease, and what is left of its key's daily quotas (None: no quota)."""

    key: Key
    lease: str = ""  # the slot's id in Redis (in-process counters need none)
    tokens_left: Optional[int] = None
    cost_left: Optional[float] = None

    def limits(self) -> Limits:
        """The quota left, as limits a request's own are tightened by."""
        return Limits(max_depth=10**6, max_calls=10**9, max_tokens=self.tokens_left, max_cost_usd=self.cost_left)


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


def _admission(key: Key, tokens: float, cost: float) -> Admission:
    return Admission(key, tokens_left=None if key.tokens_per_day is None else int(key.tokens_per_day - tokens),
                     cost_left=None if key.cost_usd_per_day is None else key.cost_usd_per_day - cost)


class Counters(ABC):
    @abstractmethod
    async def acquire(self, key: Key) -> Admission:
        """Let one request of ``key`` in, or raise RateLimited."""

    @abstractmethod
    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        """The request ended: free its slot and charge what it used to the key's quota."""

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class _Bucket:
    tokens: float
    updated: float
    in_flight: int = 0
    day: str = ""
    used_tokens: int = 0
    used_cost: float = 0.0


class LocalCounters(Counters):
    """In this process (a single event loop: no locks needed)."""

    def __init__(self) -> None:
        self._state: dict[str, _Bucket] = {}

    def _bucket(self, key: Key, now: float) -> _Bucket:
        b = self._state.get(key.name)
        if b is None:
            b = self._state[key.name] = _Bucket(tokens=key.burst, updated=now)
        today = _day(time.time())  # cheap: on every admission and release
        if b.day != today:
            b.day, b.used_tokens, b.used_cost = today, 0, 0.0
        return b

    async def acquire(self, key: Key) -> Admission:
        now = time.monotonic()
        b = self._bucket(key, now)
        # Token bucket: refills at the key's rate, holds at most `burst` requests.
        b.tokens = min(key.burst, b.tokens + (now - b.updated) * key.rate_per_s)
        b.updated = now
        if b.in_flight >= key.max_concurrent:
            raise RateLimited(f"key {key.name!r} already has {b.in_flight} requests running (limit {key.max_concurrent})", 1.0)
        if b.tokens < 1.0:
            raise RateLimited(f"key {key.name!r} is over its request rate ({key.rate_per_s * 60:g}/min)", (1.0 - b.tokens) / key.rate_per_s)
        spent = _quota_error(key, b.used_tokens, b.used_cost, time.time())
        if spent is not None:
            raise spent
        b.tokens -= 1.0
        b.in_flight += 1
        return _admission(key, b.used_tokens, b.used_cost)

    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        b = self._bucket(admission.key, time.monotonic())
        b.in_flight = max(0, b.in_flight - 1)
        if usage is not None:
            b.used_tokens += usage.total_tokens
            b.used_cost += usage.cost_usd


# One atomic admission. KEYS: bucket hash, in-flight lease set, quota hash. ARGV: rate/s, burst,
# max concurrent, lease id, lease seconds, tokens per day (-1: none), cost per day (-1: none).
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
local q = redis.call('HMGET', KEYS[3], 'tokens', 'cost')
local used_tokens, used_cost = tonumber(q[1]) or 0, tonumber(q[2]) or 0
local tpd, cpd = tonumber(ARGV[6]), tonumber(ARGV[7])
if (tpd >= 0 and used_tokens >= tpd) or (cpd >= 0 and used_cost >= cpd) then
  return {3, tostring(used_tokens), tostring(used_cost)}
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 60)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[4])
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5]) * 2)
return {0, tostring(used_tokens), tostring(used_cost)}
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

    def _keys(self, key: Key, now: float) -> list[str]:
        base = f"{self.prefix}:key:{key.name}"
        return [f"{base}:bucket", f"{base}:inflight", f"{base}:quota:{_day(now)}"]

    async def start(self) -> None:
        await self.redis.ping()  # fail at start-up, not on the first request
        self._renewer = asyncio.create_task(self._renew_forever())

    async def acquire(self, key: Key) -> Admission:
        now = time.time()
        admission = Admission(key, lease=uuid.uuid4().hex)
        result = await self._acquire(keys=self._keys(key, now), args=[
            key.rate_per_s, key.burst, key.max_concurrent, admission.lease, self.lease_s,
            -1 if key.tokens_per_day is None else key.tokens_per_day, -1 if key.cost_usd_per_day is None else key.cost_usd_per_day])
        verdict = int(result[0])
        if verdict == 1:
            raise RateLimited(f"key {key.name!r} already has {result[1]} requests running (limit {key.max_concurrent})", 1.0)
        if verdict == 2:
            raise RateLimited(f"key {key.name!r} is over its request rate ({key.rate_per_s * 60:g}/min)", float(result[1]))
        tokens, cost = float(result[1]), float(result[2])
        if verdict == 3:
            raise _quota_error(key, tokens, cost, now) or RateLimited(f"key {key.name!r}: quota spent", 60, "insufficient_quota")
        self._leases[admission.lease] = key
        out = _admission(key, tokens, cost)
        out.lease = admission.lease
        return out

    async def release(self, admission: Admission, usage: Optional[Usage]) -> None:
        key = admission.key
        self._leases.pop(admission.lease, None)
        bucket, inflight, quota = self._keys(key, time.time())
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(inflight, admission.lease)
            if usage is not None and (key.tokens_per_day is not None or key.cost_usd_per_day is not None):
                pipe.hincrby(quota, "tokens", usage.total_tokens)
                pipe.hincrbyfloat(quota, "cost", usage.cost_usd)
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
                        pipe.zadd(self._keys(key, 0)[1], {lease: expiry}, xx=True)
                    await pipe.execute()
            except Exception:  # Redis away for a moment: the next round renews them
                import logging

                logging.getLogger(__name__).exception("could not renew %d lease(s)", len(self._leases))

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        await self.redis.aclose()


def make_counters(url: Optional[str]) -> Counters:
    return RedisCounters(url) if url else LocalCounters()
