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
from typing import AsyncIterator, Optional

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..providers.simulated import TOOL_RESULT_MARK, schema_instance


def _tool_reply(body: dict, prompt: str) -> Optional[list[dict]]:
    """Like the simulated provider: call the first offered tool until a tool result is in the prompt."""
    tools = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function"]
    if not tools or body.get("tool_choice") == "none" or TOOL_RESULT_MARK in prompt:
        return None
    tool = tools[0]
    args = {k: schema_instance(v, "simulated") for k, v in (tool.get("parameters") or {}).get("properties", {}).items()}
    return [{"id": f"call_sim{hashlib.sha256(prompt.encode()).hexdigest()[:12]}", "type": "function",
             "function": {"name": tool["name"], "arguments": json.dumps(args)}}]


def _context_too_long(context_words: int, prompt: str) -> Response:
    """OpenAI's 400 for a prompt over the context."""
    return JSONResponse({"error": {"message": f"This model's maximum context length is {context_words} tokens. However, your "
                                   f"messages resulted in {len(prompt.split())} tokens. Please reduce the length of the messages.",
                                   "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
                        status_code=400)


async def _sse(base: dict, tokens: list[str], calls: Optional[list], finish: str, usage: dict, body: dict, cut: bool,
               token_delay_s: float) -> AsyncIterator[str]:
    """A streamed reply as server-sent events: the tokens (broken after 3 when ``cut``), the tool calls, the finish
    chunk, the usage chunk if asked for, ``[DONE]``."""
    for i, token in enumerate(tokens):
        if cut and i == 3:
            raise ConnectionAbortedError("simulated: the upstream dropped the stream")
        piece = token if i == 0 else " " + token
        chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        yield f"data: {json.dumps(chunk)}\n\n"
        if token_delay_s:
            await asyncio.sleep(token_delay_s)
    for i, call in enumerate(calls or []):  # as OpenAI streams them: id and name first, then the arguments in pieces
        args = call["function"]["arguments"]
        for piece in ({"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}},
                      {"index": i, "function": {"arguments": args[: len(args) // 2]}}, {"index": i, "function": {"arguments": args[len(args) // 2:]}}):
            chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
    done = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield f"data: {json.dumps(done)}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def create_upstream(latency_s: float = 0.1, token_delay_s: float = 0.0, words: int = 8, fail_status: int = 0,
                    context_words: int = 0) -> Starlette:
    """``fail_status`` > 0 answers every call with that HTTP status (an outage); ``context_words`` > 0
    answers a longer prompt with OpenAI's 400 ``context_length_exceeded``. Given ``tools`` it calls the
    first one until a tool result is in the prompt; given a JSON schema ``response_format`` it answers
    with an instance of it."""
    state = {"calls": 0, "streamed": 0, "fail_status": fail_status, "cut_streams": 0, "cut_model": None, "last_body": None}

    async def chat(request: Request) -> Response:
        state["calls"] += 1
        body = json.loads(await request.body())
        await asyncio.sleep(latency_s)
        if state["fail_status"]:  # checked after the wait: an outage can begin while a call is in flight
            return JSONResponse({"error": {"message": "simulated outage", "type": "server_error"}}, status_code=state["fail_status"])
        state["last_body"] = body
        prompt = "".join(str(m.get("content", "")) for m in body["messages"])
        if context_words and len(prompt.split()) > context_words:
            return _context_too_long(context_words, prompt)
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        n = min(words, int(body.get("max_tokens") or words))
        tokens = [body["model"]] + [digest[2 * i: 2 * i + 6] for i in range(n - 1)]
        calls = _tool_reply(body, prompt)
        fmt = body.get("response_format") or {}
        if calls:
            tokens = []
        elif fmt.get("type") == "json_schema":
            tokens = [json.dumps(schema_instance(fmt["json_schema"]["schema"], " ".join(tokens)))]
        text = " ".join(tokens)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n, "total_tokens": len(prompt.split()) + n}
        base = {"id": f"chatcmpl-sim{state['calls']}", "created": int(time.time()), "model": body["model"]}
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}
            return JSONResponse({**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "finish_reason": finish, "message": message}]})

        state["streamed"] += 1
        # This stream breaks after 3 tokens (the connection drops), if cuts are pending for its model.
        cut = state["cut_streams"] > 0 and state["cut_model"] in (None, body["model"])
        state["cut_streams"] -= 1 if cut else 0

        return StreamingResponse(_sse(base, tokens, calls, finish, usage, body, cut, token_delay_s), media_type="text/event-stream")

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
