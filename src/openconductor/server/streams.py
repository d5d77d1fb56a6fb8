"""The two streams, each its own unit: a running workflow as Chat Completions chunks, or as Responses
events. Both yield typed objects (the HTTP route frames them as SSE with sse-starlette; the in-process
client hands them to the caller) and end with an ``APIError`` item when the run has no answer.

Chat: standard clients see an ordinary ``chat.completion.chunk`` stream (the final step's tokens as the
worker writes them, tool calls, a finish chunk, a usage chunk only with ``stream_options.include_usage``);
each chunk may carry the typed extension field ``conductor`` (workflow events) that they ignore.
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Callable, Optional, Union

from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice as ChunkChoice,
    ChoiceDelta,
    ChoiceDeltaFunctionCall,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from pydantic import BaseModel

from . import builders
from .errors import APIError
from .requests import Accepted
from .runs import AnswerFilter, RunHandle

ErrorHook = Callable[[APIError], None]


class _Answer:
    """The final step's text as streamed: filtered like ``executor.clean_answer``, reset on a retry."""

    def __init__(self) -> None:
        self.filter = AnswerFilter()
        self.parts: list[str] = []

    def feed(self, text: str) -> str:
        piece = self.filter.feed(text)
        if piece:
            self.parts.append(piece)
        return piece

    def finish(self) -> str:
        piece = self.filter.finish()
        if piece:
            self.parts.append(piece)
        return piece

    def reset(self) -> None:
        self.filter = AnswerFilter()

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _unanswered(run, conversation: str, request, on_error: ErrorHook) -> Optional[APIError]:
    """The error a stream ends with when its run has no answer (counted by ``on_error``), else None."""
    if builders.answered(run):
        return None
    error = builders.run_error(run, conversation, request)
    on_error(error)
    return error


def _chat_chunker(run: Any, request: Any, created: int) -> Callable[..., ChatCompletionChunk]:
    """The chunks of one chat stream: a delta and finish reason, the ``conductor`` extension, or none (``choices=False``)."""
    preset = request.preset

    def chunk(delta: Optional[dict] = None, finish: Optional[str] = None, conductor: Optional[BaseModel] = None,
              choices: bool = True, **extra: Any) -> ChatCompletionChunk:
        fields: dict[str, Any] = dict(id=f"chatcmpl-{run.id}", object="chat.completion.chunk", created=created,
                                      model=request.model_id, system_fingerprint=preset.fingerprint,
                                      choices=[ChunkChoice(index=0, delta=ChoiceDelta(**(delta or {})), finish_reason=finish)]
                                      if choices else [], **extra)
        if conductor is not None:
            fields["conductor"] = builders.extension(conductor)
        return ChatCompletionChunk(**fields)

    return chunk


async def _chat_progress(handle: RunHandle, run: Any, chunk: Callable[..., ChatCompletionChunk],
                         answer: _Answer) -> AsyncIterator[ChatCompletionChunk]:
    """The run's progress until it ends: the plan, each step, the final step's tokens; the final step's summary
    after the answer's last piece."""
    held_final: Optional[builders.StepFinished] = None
    async for event in handle.events():
        step = event.step
        if event.type == "plan" and event.run.depth == 0:
            yield chunk(conductor=builders.plan_made(run))
        elif event.type == "step_started" and step is not None:
            yield chunk(conductor=builders.StepStarted(index=step.index, depth=event.run.depth, worker=step.worker_name))
        elif event.type == "step_finished" and step is not None:
            summary = builders.step_finished(step, event.run.depth)
            if event.is_final_step:
                if held_final is not None:  # a step was appended after the one held (a plan that ended in a tool)
                    yield chunk(conductor=held_final)
                held_final = summary  # announced after the answer's tokens, whatever order they came in
            else:
                yield chunk(conductor=summary)
        elif event.type == "step_token" and event.is_final_step:
            piece = answer.feed(event.text)
            if piece:
                yield chunk({"content": piece})
        elif event.type == "step_retry" and step is not None:
            # A failed attempt's tokens are void; content already sent cannot be taken back, so
            # extension-aware clients are told to discard it (streamed_matches_final says so too).
            yield chunk(conductor=builders.StepRetried(index=step.index, depth=event.run.depth, worker=step.worker_name,
                                                       error=event.text, discard_streamed_content=event.is_final_step and bool(answer.parts)))
            if event.is_final_step:
                answer.reset()
    await handle.wait()
    piece = answer.finish()
    if piece:
        yield chunk({"content": piece})
    if held_final is not None:
        yield chunk(conductor=held_final)


def _chat_tool_calls(run: Any, legacy_functions: bool) -> Optional[dict[str, Any]]:
    """The delta that carries the run's tool calls (one legacy ``function_call``, or ``tool_calls``), or None."""
    if run.tool_calls and legacy_functions:
        call = run.tool_calls[0]
        return {"function_call": ChoiceDeltaFunctionCall(name=call.name, arguments=call.arguments)}
    if run.tool_calls:
        return {"tool_calls": [ChoiceDeltaToolCall(index=i, id=c.id, type="function",
                                                   function=ChoiceDeltaToolCallFunction(name=c.name, arguments=c.arguments))
                               for i, c in enumerate(run.tool_calls)]}
    return None


async def chat_stream(handle: RunHandle, accepted: Accepted, on_error: ErrorHook) -> AsyncIterator[Union[ChatCompletionChunk, APIError]]:
    request = handle.request
    preset = request.preset
    created = int(time.time())
    answer = _Answer()
    try:
        await handle.started.wait()
        run = handle.run
        assert run is not None
        chunk = _chat_chunker(run, request, created)
        yield chunk({"role": "assistant", "content": ""}, conductor=builders.run_started(run, preset))
        async for progress in _chat_progress(handle, run, chunk, answer):
            yield progress
        run = await handle.wait()
        error = _unanswered(run, "messages", handle.request, on_error)
        if error is not None:
            yield error
            return
        text = answer.text
        if not text and run.final_answer:
            # Nothing streamed (the last step was a recursive round, its answer came whole, or it failed and
            # an earlier answer stands): send the final answer in one piece.
            yield chunk({"content": run.final_answer})
            text = run.final_answer
        calls = _chat_tool_calls(run, accepted.legacy_functions)
        if calls is not None:
            yield chunk(calls)
        yield chunk({}, finish=builders.finish_reason(run, accepted.legacy_functions),
                    conductor=builders.run_finished(run, request, final_answer=run.final_answer, streamed_matches_final=text == run.final_answer))
        if accepted.include_usage:
            yield chunk(choices=False, usage=builders.chat_usage(run))
    finally:
        handle.cancel()  # no-op when finished; a client that went away cancels its run


class _ResponsesEvents:
    """The events of one Responses stream, numbered in order; the message item (``msg_<run id>``) opens with its
    first text."""

    def __init__(self) -> None:
        self.seq = 0
        self.item_id = ""
        self.opened = False

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"type": kind, "sequence_number": self.seq, **fields}

    def open_message(self) -> list[dict[str, Any]]:
        self.opened = True
        return [self.event("response.output_item.added", output_index=0,
                           item={"id": self.item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}),
                self.event("response.content_part.added", item_id=self.item_id, output_index=0, content_index=0,
                           part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})]

    def delta(self, text: str) -> list[dict[str, Any]]:
        out = [] if self.opened else self.open_message()
        return out + [self.event("response.output_text.delta", item_id=self.item_id, output_index=0, content_index=0, delta=text, logprobs=[])]

    def message_done(self, text: str, item: dict[str, Any]) -> list[dict[str, Any]]:
        """The message item's closing events (opening it first if no text was streamed)."""
        out = [] if self.opened else self.open_message()
        return out + [
            self.event("response.output_text.done", item_id=self.item_id, output_index=0, content_index=0, text=text, logprobs=[]),
            self.event("response.content_part.done", item_id=self.item_id, output_index=0, content_index=0,
                       part={"type": "output_text", "text": text, "annotations": [], "logprobs": []}),
            self.event("response.output_item.done", output_index=0, item=item)]

    def function_calls(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each function_call item's events: added, its arguments whole as one delta, done."""
        out = []
        for index, item in enumerate(items):
            if item["type"] != "function_call":
                continue
            out += [self.event("response.output_item.added", output_index=index, item={**item, "arguments": "", "status": "in_progress"}),
                    self.event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=item["arguments"]),
                    self.event("response.function_call_arguments.done", item_id=item["id"], output_index=index, name=item["name"],
                               arguments=item["arguments"]),
                    self.event("response.output_item.done", output_index=index, item=item)]
        return out


async def responses_stream(handle: RunHandle, accepted: Accepted, on_error: ErrorHook) -> AsyncIterator[Union[dict[str, Any], APIError]]:
    """Responses events as dicts (``type``, ``sequence_number``, fields). The message item opens with the
    first text, so an answer that is only tool calls has function_call items and no empty message."""
    request = handle.request
    answer = _Answer()
    events = _ResponsesEvents()
    try:
        await handle.started.wait()
        run = handle.run
        assert run is not None
        events.item_id = f"msg_{run.id}"
        started = builders.response(run, request, accepted, "in_progress").model_dump(mode="json", exclude_unset=True)
        yield events.event("response.created", response=started)
        yield events.event("response.in_progress", response=started)
        async for ev in handle.events():
            if ev.type == "step_retry" and ev.is_final_step:
                answer.reset()  # the retried attempt streams its answer again
            if ev.type == "step_token" and ev.is_final_step:
                piece = answer.feed(ev.text)
                if piece:
                    for e in events.delta(piece):
                        yield e
        run = await handle.wait()
        piece = answer.finish()
        if piece:
            for e in events.delta(piece):
                yield e
        error = _unanswered(run, "input", handle.request, on_error)
        if error is not None:
            yield error
            return
        text = answer.text
        if not text and run.final_answer:
            text = run.final_answer
            for e in events.delta(text):
                yield e
        final = builders.response(run, request, accepted, "completed", text=text)
        items = [item.model_dump(mode="json", exclude_unset=True) for item in final.output]
        if text or not run.tool_calls:
            for e in events.message_done(text, items[0]):
                yield e
        for e in events.function_calls(items):
            yield e
        kind = "response.incomplete" if final.status == "incomplete" else "response.completed"
        yield events.event(kind, response=final.model_dump(mode="json", exclude_unset=True))
    finally:
        handle.cancel()
