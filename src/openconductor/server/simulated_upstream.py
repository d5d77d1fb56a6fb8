"""A simulated OpenAI-compatible upstream: fixed latency, deterministic text, optional token streaming.

For tests and load benchmarks of the server in front of workers reached over real loopback HTTP
(workers use provider "openai" with ``base_url`` pointing here). Not a model: numbers measured with
it are labelled "simulated workers".

    python -m openconductor.server.simulated_upstream --port 9100 --latency 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def create_upstream(latency_s: float = 0.1, token_delay_s: float = 0.0, words: int = 8, fail_status: int = 0) -> Starlette:
    """``fail_status`` > 0 answers every call with that HTTP status (an outage)."""
    state = {"calls": 0, "streamed": 0, "fail_status": fail_status, "cut_streams": 0, "cut_model": None}

    async def chat(request: Request) -> Response:
        state["calls"] += 1
        body = json.loads(await request.body())
        await asyncio.sleep(latency_s)
        if state["fail_status"]:  # checked after the wait: an outage can begin while a call is in flight
            return JSONResponse({"error": {"message": "simulated outage", "type": "server_error"}}, status_code=state["fail_status"])
        prompt = "".join(str(m.get("content", "")) for m in body["messages"])
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        n = min(words, int(body.get("max_tokens") or words))
        tokens = [body["model"]] + [digest[2 * i: 2 * i + 6] for i in range(n - 1)]
        text = " ".join(tokens)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n, "total_tokens": len(prompt.split()) + n}
        base = {"id": f"chatcmpl-sim{state['calls']}", "created": int(time.time()), "model": body["model"]}
        if not body.get("stream"):
            return JSONResponse({**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})

        state["streamed"] += 1
        # This stream breaks after 3 tokens (the connection drops), if cuts are pending for its model.
        cut = state["cut_streams"] > 0 and state["cut_model"] in (None, body["model"])
        state["cut_streams"] -= 1 if cut else 0

        async def events():
            for i, token in enumerate(tokens):
                if cut and i == 3:
                    raise ConnectionAbortedError("simulated: the upstream dropped the stream")
                piece = token if i == 0 else " " + token
                chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
                if token_delay_s:
                    await asyncio.sleep(token_delay_s)
            done = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield f"data: {json.dumps(done)}\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def control(request: Request) -> Response:
        """POST {"fail_status": 503} switches an outage on (0 switches it off); {"cut_streams": n, "cut_model":
        "m"} breaks the next n streams (of model m) after 3 tokens; GET reads the state."""
        if request.method == "POST":
            state.update({k: v for k, v in (await request.json()).items() if k in ("fail_status", "cut_streams", "cut_model")})
        return JSONResponse(state)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/control", control, methods=["GET", "POST"])])


def main() -> None:  # pragma: no cover - run as a process by the load benchmark
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--words", type=int, default=8)
    args = parser.parse_args()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the simulated upstream binds to loopback only")
    uvicorn.run(create_upstream(args.latency, args.token_delay, args.words), host=args.host, port=args.port,
                log_level="warning", access_log=False, backlog=4096,
                timeout_keep_alive=75)  # like hosted APIs: idle connections stay open well past a client's reuse


if __name__ == "__main__":  # pragma: no cover
    main()
