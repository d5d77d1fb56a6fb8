"""The floor for benchmarks/server_load.py: a bare FastAPI pass-through with no conductor in it.

POST /v1/chat/completions forwards the body to the upstream with the same HTTP client the server's
openai provider uses (one pooled aiohttp session) and returns the upstream's bytes: the least any
OpenAI-compatible proxy in Python does per request. Run by the benchmark under the same uvicorn
settings as `conductor serve`:

    UPSTREAM=http://127.0.0.1:9100 python -m uvicorn passthrough_app:app --app-dir benchmarks --port 9200
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager

import aiohttp
from fastapi import FastAPI, Request
from fastapi.responses import Response

UPSTREAM = os.environ.get("UPSTREAM", "http://127.0.0.1:9100").rstrip("/") + "/v1/chat/completions"
session: dict = {}


@asynccontextmanager
async def lifespan(_app: FastAPI):
    session["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=4000, keepalive_timeout=15),
                                         headers={"Content-Type": "application/json"})
    yield
    await session["s"].close()


app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)


@app.post("/v1/chat/completions")
async def chat(request: Request) -> Response:
    body = await request.body()
    async with session["s"].post(UPSTREAM, data=body) as upstream:
        data = await upstream.read()
        return Response(data, status_code=upstream.status, media_type="application/json")


@app.get("/health")
async def health() -> dict:
    return {"status": "ok", "pid": os.getpid()}
