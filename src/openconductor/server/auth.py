"""Bearer keys, compared as sha256 digests in constant time, and what each key may do."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Optional

from ..budget import Limits
from .config import KeySpec, ServerConfig, hash_key


class AuthError(Exception):
    """Missing or unknown key (401)."""


@dataclass(frozen=True)
class Key:
    """One key's ceilings. Its live counters (rate, in flight, quota) are in ``counters.Counters``."""

    name: str
    limits: Limits
    max_concurrent: int
    rate_per_s: float
    burst: float
    reads_all_traces: bool = False  # else only the runs this key started
    tokens_per_day: Optional[int] = None
    cost_usd_per_day: Optional[float] = None


def _key(spec: KeySpec) -> Key:
    burst = float(spec.burst or max(1, int(spec.requests_per_minute / 6)))
    return Key(spec.name, spec.limits, spec.max_concurrent, spec.requests_per_minute / 60.0, burst, spec.traces == "all",
               spec.tokens_per_day, spec.cost_usd_per_day)


class KeyRing:
    def __init__(self, config: ServerConfig):
        self.required = config.auth.required
        self._keys: list[tuple[bytes, Key]] = []
        for spec in config.keys:
            digest = spec.digest()
            if digest is None:  # an env key whose variable is unset: that key cannot log in
                continue
            self._keys.append((digest.encode(), _key(spec)))
        a = config.auth
        # No keys: one local user, who sees every run.
        self.anonymous = Key("anonymous", a.anonymous_limits, a.anonymous_max_concurrent, a.anonymous_requests_per_minute / 60.0,
                             float(max(1, int(a.anonymous_requests_per_minute / 6))), reads_all_traces=True)

    def authenticate(self, authorization: Optional[str]) -> Key:
        if not self.required:
            return self.anonymous
        if not authorization:
            raise AuthError("missing API key: send the header 'Authorization: Bearer <key>' (or 'api-key: <key>', or 'x-api-key: <key>')")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("malformed Authorization header: expected 'Bearer <key>'")
        digest = hash_key(token).encode()
        found = None
        for stored, key in self._keys:  # every key is compared, so timing does not tell which matched
            if hmac.compare_digest(stored, digest):
                found = key
        if found is None:
            raise AuthError("incorrect API key provided")
        return found


# Where other clients put the key: Azure OpenAI's SDKs send `api-key`, Anthropic-style clients `x-api-key`.
KEY_HEADERS = (b"api-key", b"x-api-key")


class KeyHeaders:
    """ASGI middleware: a request with no Authorization header but a key in ``api-key`` or ``x-api-key`` is read
    as ``Authorization: Bearer <key>``, so every route authenticates it the same way."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = scope["headers"]  # ASGI servers lower-case header names
            if not any(name == b"authorization" for name, _ in headers):
                key = next((value.strip() for name, value in headers if name in KEY_HEADERS and value.strip()), None)
                if key is not None:
                    scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + key)]}
        await self.app(scope, receive, send)
