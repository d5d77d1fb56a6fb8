"""Prometheus metrics in the app's own registry (several apps in one process stay separate), and the event
loop's lag in debug mode."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..records import Run

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/models", "/v1/traces", "/health", "/metrics")


LAG_PERIOD_S = 0.005


async def watch_loop_lag(threshold_s: float, report: Callable[[float], None]) -> None:
    """``report(lag_s)`` whenever a sleep of ``LAG_PERIOD_S`` returns more than ``threshold_s`` late: how long the
    loop was held, or the process not scheduled. The server runs it with ``server.slow_callback_ms`` (debug mode);
    benchmarks/server_hostile.py runs it in an idle process beside the server, for the machine's floor."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(LAG_PERIOD_S)
        lag = loop.time() - start - LAG_PERIOD_S
        if lag > threshold_s:
            report(lag)


def route_label(path: str) -> str:
    if path.startswith("/v1/traces/"):
        return "/v1/traces/{id}"
    return path if path in ROUTES else ("/" if path == "/" or path.startswith("/static/") else "other")


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("openconductor_http_requests_total", "HTTP requests", ["route", "method", "status"], registry=r)
        self.latency = Histogram("openconductor_http_request_duration_seconds", "Time to the end of the response (streams: to the last byte)",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("openconductor_http_requests_in_flight", "Requests being served", registry=r)
        self.errors = Counter("openconductor_errors_total", "Errors answered, by type", ["type"], registry=r)
        self.runs = Counter("openconductor_runs_total", "Workflows run, by preset and final status", ["preset", "endpoint", "status"], registry=r)
        self.tokens = Counter("openconductor_tokens_total", "Tokens used, by preset and who used them", ["preset", "kind"], registry=r)
        self.worker_tokens = Counter("openconductor_worker_tokens_total", "Worker tokens, by worker", ["preset", "worker"], registry=r)
        self.cost = Counter("openconductor_cost_usd_total", "Cost in USD", ["preset"], registry=r)
        self.steps = Counter("openconductor_workflow_steps_total", "Workflow steps run", ["preset"], registry=r)
        self._children: dict[tuple, object] = {}

    def error(self, kind: str) -> None:
        self._child(self.errors, kind).inc()

    def api_error(self, error) -> None:
        """An ``errors.APIError`` answered inside a stream (raised ones are counted by the app's handler)."""
        self.error(error.code or error.type)

    def _child(self, metric, *labels: str):
        """A labelled child, looked up once (``labels()`` locks and validates on every call)."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def run(self, run: Run, preset: str, endpoint: str) -> None:
        t = run.totals
        self._child(self.runs, preset, endpoint, run.status).inc()
        self._child(self.tokens, preset, "conductor").inc(t.conductor_usage.total_tokens)
        self._child(self.tokens, preset, "worker").inc(t.worker_usage.total_tokens)
        for name, usage in t.per_worker.items():
            self._child(self.worker_tokens, preset, name).inc(usage.total_tokens)
        self._child(self.cost, preset).inc(t.worker_usage.cost_usd + t.conductor_usage.cost_usd)
        self._child(self.steps, preset).inc(len(run.steps))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def middleware_class(self):
        metrics = self

        class MetricsMiddleware:
            """Pure ASGI (no per-request task or body buffering, unlike BaseHTTPMiddleware)."""

            def __init__(self, app):
                self.app = app

            async def __call__(self, scope, receive, send):
                if scope["type"] != "http":
                    return await self.app(scope, receive, send)
                start = time.perf_counter()
                status = {"code": 500}

                async def send_wrapper(message):
                    if message["type"] == "http.response.start":
                        status["code"] = message["status"]
                    await send(message)

                metrics.in_flight.inc()
                route = route_label(scope["path"])
                try:
                    await self.app(scope, receive, send_wrapper)
                finally:
                    metrics.in_flight.dec()
                    metrics._child(metrics.requests, route, scope["method"], str(status["code"])).inc()
                    metrics._child(metrics.latency, route).observe(time.perf_counter() - start)

        return MetricsMiddleware
