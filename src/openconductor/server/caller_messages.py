"""A request's conversation as Chat Completions messages, for a passthrough preset (policies/passthrough.py):
the worker gets what the caller sent, whichever API it came through (Chat, Responses, legacy completions)."""

from __future__ import annotations

from typing import Any

from .requests import Turn


def caller_messages(turns: list[Turn]) -> list[dict[str, Any]]:
    """Each turn as the message the caller sent: instructions as ``system``, an assistant's tool calls and the
    ``tool`` results that answer them by id."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.role == "assistant" and turn.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in turn.tool_calls]
            message["content"] = turn.text or None
        if turn.role == "tool":
            message["tool_call_id"] = turn.call_id or ""
        messages.append(message)
    return messages
