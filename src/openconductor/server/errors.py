"""The API's one error type, rendered as OpenAI's ``{"error": {...}}`` object, and readable messages
from pydantic's validation errors."""

from __future__ import annotations

from typing import Optional


class APIError(Exception):
    """Any error the API answers with."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", code: Optional[str] = None,
                 param: Optional[str] = None, headers: Optional[dict[str, str]] = None, extra: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = headers or {}
        self.extra = extra or {}

    def __reduce__(self):  # raised in a request-check process, re-raised here
        return (_api_error, (self.status, self.message, dict(type=self.type, code=self.code, param=self.param, headers=self.headers,
                                                              extra=self.extra)))

    def body(self) -> dict:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        error.update(self.extra)
        return {"error": error}


def _api_error(status: int, message: str, fields: dict) -> APIError:
    return APIError(status, message, **fields)


def unsupported(param: str, why: str) -> APIError:
    """A parameter this server cannot honour: a 400 that names it, never a silent no-op."""
    return APIError(400, f"{param}: {why}", code="unsupported_parameter", param=param)


def validation_message(errors: list[dict], prefix: str = "") -> tuple[str, Optional[str]]:
    """One readable message from pydantic errors, and the first offending parameter."""
    parts, param = [], None
    for e in errors[:5]:
        path = [str(p) for p in e.get("loc", ()) if p != "body"]
        # pydantic names union members in the path (e.g. "str", "list[...]"); the caller's field is enough
        path = [p for p in path if not (p.startswith(("list[", "dict[", "Union[", "function-")) or p in ("str", "int", "float", "bool"))]
        loc = ".".join(p if not p.isdigit() else f"[{p}]" for p in path).replace(".[", "[")
        loc = f"{prefix}{loc}" if prefix and loc.startswith("[") else ".".join(x for x in (prefix, loc) if x)
        param = param or loc or None
        message = e.get("msg", "invalid")
        if e.get("type") == "extra_forbidden":
            message = "unknown parameter"
        parts.append(f"{loc or 'body'}: {message}")
    return "; ".join(parts), param
