"""Strict parsing of model text into Responses-style items.

The chat template renders a tool call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
Parsing is deliberately strict: the whole assistant text must be either plain text (a final
answer, no ``<tool_call>`` marker) or one or more complete tool-call blocks and nothing else.
A lenient parser (first JSON object, trailing text ignored) is reward-hacked: GRPO teaches a
small policy to append junk after a valid call (``{"tool": "set_timer"}}"}}...``) and still be
paid for it (``tests/test_tool_calls.py`` keeps that case refused).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gymflow.core.failures import FailureKind

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_BLOCK = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)


@dataclass(frozen=True)
class ParsedTurn:
    """One assistant turn: plain ``text``, or ``calls`` (name, arguments dict); ``error`` if neither."""

    text: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    error: FailureKind | None = None
    error_detail: str = ""


def parse_assistant_text(text: str) -> ParsedTurn:
    """Parse one assistant turn strictly.

    >>> parse_assistant_text('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>').calls
    [('f', {'x': 1})]
    >>> parse_assistant_text('<tool_call>{"name": "f"}}</tool_call>').error
    <FailureKind.INVALID_JSON: 'invalid_json'>
    """
    stripped = text.strip()
    if CALL_OPEN not in stripped and CALL_CLOSE not in stripped:
        return ParsedTurn(text=stripped)
    calls: list[tuple[str, dict]] = []
    pos = 0
    for match in _BLOCK.finditer(stripped):
        if stripped[pos : match.start()].strip():
            return _invalid(stripped, "text outside <tool_call> blocks")
        pos = match.end()
        try:
            obj = strict_json(match.group(1))
        except json.JSONDecodeError as exc:
            return _invalid(stripped, f"tool call is not JSON: {exc.msg} at char {exc.pos}")
        except (ValueError, RecursionError) as exc:
            return _invalid(stripped, f"tool call is not strict JSON: {exc}")
        if not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
            return _invalid(stripped, 'tool call must be {"name": str, "arguments": object}')
        if not isinstance(obj["name"], str) or not isinstance(obj["arguments"], dict):
            return _invalid(stripped, 'tool call must be {"name": str, "arguments": object}')
        calls.append((obj["name"], obj["arguments"]))
    if not calls or stripped[pos:].strip():
        return _invalid(stripped, "unterminated or trailing text after </tool_call>")
    return ParsedTurn(text="", calls=calls)


def strict_json(text: str) -> object:
    """``json.loads`` minus its extensions: no NaN/Infinity, duplicate keys or lone surrogates.

    Those are not JSON (RFC 8259) and break downstream: httpx refuses NaN and cannot encode a
    lone surrogate to UTF-8, and a duplicated key makes the call ambiguous. Very deep nesting
    raises ``RecursionError``, which the caller turns into a parse error as well.
    """
    obj = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone surrogate (not valid Unicode)") from None
    return obj


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen.add(key)
    return dict(pairs)


def _invalid(text: str, detail: str) -> ParsedTurn:
    return ParsedTurn(text=text, error=FailureKind.INVALID_JSON, error_detail=detail)


def render_call(name: str, arguments: dict) -> str:
    """The exact text the chat template produces for one call (used for demonstrations)."""
    return CALL_OPEN + json.dumps({"name": name, "arguments": arguments}) + CALL_CLOSE
