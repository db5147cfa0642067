"""The one reading of a trajectory a verifier is given: Responses items, normalised and checked.

A verifier is written for the items the agent loop builds: ``message`` items whose ``content``
is a string, ``function_call`` items (``name``, ``arguments`` as a JSON string, ``call_id``) and
their ``function_call_output`` items. A client may send any item the OpenAI Responses format
allows, and anything else. :func:`normalize_items` turns the first into the second and refuses
the rest, and it is the only road: the resources server's ``/verify``, ``gymflow verify`` and
the NeMo Gym rollout reader (:func:`gymflow.data.nemo_gym.parse_rollout_row`) all call it, so
no two of them can score one trajectory differently.

What it accepts:

* a message's ``content`` as a string or as a list of content parts, each with a string
  ``text`` (``output_text``, ``input_text``, ``text``, ``summary_text``, …) or a ``refusal``
  string; the parts' texts are joined. A function call's ``output`` may be such a list too;
* any extra field (``id``, ``status``, ``annotations``, ``logprobs``): read past. The result
  holds only the fields the agent loop writes (``type``, ``role``, ``content``, ``call_id``,
  ``name``, ``arguments``, ``output``, and a message's ``parse_error``), so the same answer
  reads the same whether it came from the agent loop, an export or another harness;
* item types of the Responses format that no verifier here scores (``reasoning``, web-search,
  MCP and other built-in tool calls, ``item_reference``, …): left out of what the verifier
  sees, not refused.

An assistant message whose text is broken gymflow tool-call markup gets ``parse_error`` (as
when the agent loop produced it), unless it carries one already, and its text is stripped of
surrounding whitespace as the agent loop strips a model's reply (:func:`parse_assistant_text`).

What it refuses, with :class:`ItemError` naming the first problem (the server and ``gymflow
verify`` score it ``invalid_trajectory``, the model's or its client's mistake, never a crash):
an item that is not an object or has no string ``type``, an unknown item type, a call id,
name or ``arguments`` that is not a string, a part with no text, a message without a role.

>>> normalize_items([{"type": "message", "role": "assistant", "id": "msg_0",
...     "content": [{"type": "output_text", "text": "4", "annotations": []}]}])
[{'type': 'message', 'role': 'assistant', 'content': '4'}]
>>> normalize_items([{"type": "reasoning", "summary": []}])
[]
>>> normalize_items([{"type": "function_call", "name": "f", "arguments": {}, "call_id": "c"}])
Traceback (most recent call last):
...
gymflow.env.items.ItemError: items.0.function_call: 'arguments' must be a string
"""

from __future__ import annotations

from gymflow.core.tool_calls import parse_assistant_text

SCORED_TYPES = frozenset({"message", "function_call", "function_call_output"})
"""Item types a verifier reads."""

UNSCORED_TYPES = frozenset(
    {
        "reasoning",
        "item_reference",
        "compaction",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "custom_tool_call",
        "custom_tool_call_output",
    }
)
"""Item types of the Responses format that no verifier here reads: left out, not refused."""


class ItemError(ValueError):
    """A trajectory that is not of the Responses shape; the message names the first bad item."""


def normalize_items(items: object, where: str = "items") -> list[dict]:
    """The items a verifier reads, normalised; raises :class:`ItemError` on a malformed one.

    ``where`` prefixes the problem's location (``items.3.message: …``), so a reader of the
    error finds the item in what it sent (``response.output`` for a NeMo Gym rollout).
    """
    if not isinstance(items, list):
        raise ItemError(f"{where}: must be a list of Responses items")
    out = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ItemError(f"{where}.{index}: must be an object with a string 'type'")
        kind = item["type"]
        if kind in UNSCORED_TYPES:
            continue
        if kind not in SCORED_TYPES:
            raise ItemError(
                f"{where}.{index}: unknown item type {kind[:60]!r} (a verifier reads "
                f"{', '.join(sorted(SCORED_TYPES))}; Responses' built-in item types are skipped)"
            )
        out.append(_normalized(item, f"{where}.{index}.{kind}"))
    return out


def _normalized(item: dict, where: str) -> dict:
    kind = item["type"]
    if kind == "function_call":
        for key in ("name", "arguments", "call_id"):
            _require_string(item, key, where)
        return {key: item[key] for key in ("type", "call_id", "name", "arguments")}
    if kind == "function_call_output":
        _require_string(item, "call_id", where)
        output = _text(item.get("output"), f"{where}: 'output'")
        return {"type": kind, "call_id": item["call_id"], "output": output}
    _require_string(item, "role", where)
    text = _text(item.get("content"), f"{where}: 'content'")
    message = {"type": kind, "role": item["role"], "content": text}
    if item["role"] != "assistant":
        return message
    if "parse_error" in item:
        _require_string(item, "parse_error", where)
        return {**message, "parse_error": item["parse_error"]}
    parsed = parse_assistant_text(text)
    if parsed.error:
        return {**message, "parse_error": f"{parsed.error}: {parsed.error_detail}"}
    return {**message, "content": text.strip()}


def _require_string(item: dict, key: str, where: str) -> None:
    if not isinstance(item.get(key), str):
        raise ItemError(f"{where}: {key!r} must be a string")


def _text(value: object, where: str) -> str:
    """A string, or the texts of Responses content parts joined."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ItemError(f"{where} must be text or a list of content parts")
    texts = []
    for number, part in enumerate(value):
        text = None
        if isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
        if not isinstance(text, str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ItemError(f"{where} part {number} ({kind!r}) has no text")
        texts.append(text)
    return "".join(texts)
