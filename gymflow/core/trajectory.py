"""Responses-style trajectory items built from model text and tool results."""

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
