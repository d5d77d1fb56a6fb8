"""The in-process client: the SDK's calls, types and errors, with no HTTP in between."""

from __future__ import annotations

import asyncio

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from _server_kit import config, sim_pool
from openconductor.server.client import AsyncOpenConductor, OpenConductor
from openconductor.traces import TraceStore

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cfg(tmp_path):
    pool = sim_pool(tmp_path)
    return config(tmp_path, {"conductor": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}}},
                  keys=[], server={"traces": str(tmp_path / "traces.sqlite3")})


def test_sync_client_mimics_the_sdk(cfg):
    with OpenConductor(cfg) as client:
        reply = client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 6 * 7?"}])
        chunks = list(client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], stream=True,
                                                     stream_options={"include_usage": True}))
        response = client.responses.create(model="conductor", input="q", extra_body={"conductor": {"max_calls": 2}})
        events = list(client.responses.create(model="conductor", input="q", stream=True))
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "q"}])
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], n=3)
    assert isinstance(reply, ChatCompletion) and reply.choices[0].message.content.startswith("beta answer")
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks) and chunks[-1].usage.total_tokens > 0
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == chunks[-2].model_extra["conductor"]["final_answer"]
    assert isinstance(response, Response) and response.output_text and response.model_extra["conductor"]["status"] == "ok"
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert bad.value.status_code == 400 and bad.value.body["param"] == "n"
    saved = TraceStore(cfg.server.traces).get(reply.model_extra["conductor"]["trace_id"])
    assert saved.final_answer == reply.choices[0].message.content and saved.metadata["api_key"] == "in-process"


def test_async_client_runs_requests_concurrently(cfg):
    async def go():
        async with AsyncOpenConductor(cfg) as client:
            replies = await asyncio.gather(*(client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": f"q{i}"}])
                                             for i in range(5)))
            stream = await client.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "q"}], stream=True)
            pieces = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
            return replies, pieces

    replies, pieces = asyncio.run(go())
    assert len({r.id for r in replies}) == 5 and all(r.choices[0].finish_reason == "stop" for r in replies)
    assert "".join(pieces).startswith("beta answer")
