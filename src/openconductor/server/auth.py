"""Bearer keys (compared as sha256 digests in constant time) and per-key request limits."""

from __future__ import annotations

import hmac
import math
import time
from dataclasses import dataclass, field
from typing import Optional

from ..budget import Limits
from .config import KeySpec, ServerConfig, hash_key


class AuthError(Exception):
    """Missing or unknown key (401)."""


class RateLimited(Exception):
    """Too many requests or too many at once for this key (429); ``retry_after`` in seconds."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


@dataclass
class KeyState:
    """One key's ceilings and its live counters (single event loop: no locks needed)."""

    name: str
    limits: Limits
    max_concurrent: int
    rate_per_s: float
    burst: float
    tokens: float = 0.0
    updated: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    reads_all_traces: bool = False  # else only the runs this key started

    def acquire(self) -> None:
        now = time.monotonic()
        # Token bucket: refills at the key's rate, holds at most `burst` requests.
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate_per_s)
        self.updated = now
        if self.in_flight >= self.max_concurrent:
            raise RateLimited(f"key {self.name!r} already has {self.in_flight} requests running (limit {self.max_concurrent})", 1.0)
        if self.tokens < 1.0:
            raise RateLimited(f"key {self.name!r} is over its request rate ({self.rate_per_s * 60:g}/min)", (1.0 - self.tokens) / self.rate_per_s)
        self.tokens -= 1.0
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


def _state(spec: KeySpec) -> KeyState:
    burst = float(spec.burst or max(1, int(spec.requests_per_minute / 6)))
    return KeyState(spec.name, spec.limits, spec.max_concurrent, spec.requests_per_minute / 60.0, burst, tokens=burst,
                    reads_all_traces=spec.traces == "all")


class KeyRing:
    def __init__(self, config: ServerConfig):
        self.required = config.auth.required
        self._keys: list[tuple[bytes, KeyState]] = []
        for spec in config.keys:
            digest = spec.digest()
            if digest is None:  # an env key whose variable is unset: that key cannot log in
                continue
            self._keys.append((digest.encode(), _state(spec)))
        a = config.auth
        self.anonymous = KeyState("anonymous", a.anonymous_limits, a.anonymous_max_concurrent,
                                  a.anonymous_requests_per_minute / 60.0, float(max(1, int(a.anonymous_requests_per_minute / 6))))
        self.anonymous.tokens = self.anonymous.burst
        self.anonymous.reads_all_traces = True  # no keys: one local user, who sees every run

    def authenticate(self, authorization: Optional[str]) -> KeyState:
        if not self.required:
            return self.anonymous
        if not authorization:
            raise AuthError("missing API key: send the header 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("malformed Authorization header: expected 'Bearer <key>'")
        digest = hash_key(token).encode()
        found = None
        for stored, state in self._keys:  # every key is compared, so timing does not tell which matched
            if hmac.compare_digest(stored, digest):
                found = state
        if found is None:
            raise AuthError("incorrect API key provided")
        return found
