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
    as ``Authorization: Bearer <key>``, so every route authenticates it the same way. A request with two
    Authorization headers, or two different keys in the others, is a 400: which one is meant cannot be known,
    and reading the first would let a proxy's header and a client's disagree silently."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = scope["headers"]  # ASGI servers lower-case header names
            given = [value for name, value in headers if name == b"authorization"]
            others = list(dict.fromkeys(value.strip() for name, value in headers if name in KEY_HEADERS and value.strip()))
            if len(given) > 1 or (not given and len(others) > 1):
                return await _ambiguous(scope, receive, send)
            if not given and others:
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + others[0])]}
        await self.app(scope, receive, send)


async def _ambiguous(scope, receive, send) -> None:
    from starlette.responses import JSONResponse

    from .errors import APIError

    error = APIError(400, "the request carries more than one API key (two Authorization headers, or different keys in api-key "
                          "and x-api-key); send exactly one", code="ambiguous_api_key", param="Authorization")
    await JSONResponse(error.body(), status_code=400)(scope, receive, send)
