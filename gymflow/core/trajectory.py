"""Responses-style trajectory items: built from model text and tool results, and read back."""

from __future__ import annotations

import json

from gymflow.core.tool_calls import parse_assistant_text


def assistant_items(text: str, turn: int) -> list[dict]:
    """Items for one assistant turn: its function calls, or one message (maybe a parse error)."""
    parsed = parse_assistant_text(text)
    if parsed.error:
        return [
            {
                "type": "message",
                "role": "assistant",
                "content": text,
                "parse_error": f"{parsed.error}: {parsed.error_detail}",
            }
        ]
    if not parsed.calls:
        return [{"type": "message", "role": "assistant", "content": parsed.text}]
    return [
        {
            "type": "function_call",
            "call_id": f"call_{turn}_{i}",
            "name": name,
            "arguments": json.dumps(arguments, ensure_ascii=False),
        }
        for i, (name, arguments) in enumerate(parsed.calls)
    ]


def prompt_items(messages: list[dict]) -> list[dict]:
    return [{"type": "message", "role": m["role"], "content": m["content"]} for m in messages]


def final_assistant_message(items: list[dict]) -> dict | None:
    """The assistant message that ends ``items``, or ``None`` when nothing answers.

    Walks back from the end: the last assistant ``message`` item is the answer unless a
    ``function_call`` comes after it — an episode whose last turn only called tools (cut off by
    ``max_turns``) has given no answer. Tool outputs and other roles are skipped. The item is
    returned whole so a verifier can see its ``parse_error``.

    >>> final_assistant_message([{"type": "message", "role": "assistant", "content": "4"}])
    {'type': 'message', 'role': 'assistant', 'content': '4'}
    >>> final_assistant_message([{"type": "function_call", "name": "f", "arguments": "{}"}])
    """
    for item in reversed(items):
        if item.get("type") == "function_call":
            return None
        if item.get("type") == "message" and item.get("role") == "assistant":
            return item
    return None


def final_assistant_text(items: list[dict]) -> str:
    """The text of :func:`final_assistant_message` (``""`` when there is none or it is empty)."""
    message = final_assistant_message(items)
    return str(message.get("content") or "") if message is not None else ""
