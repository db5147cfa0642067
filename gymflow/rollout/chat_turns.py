"""Message-level turns in an episode: a :class:`~gymflow.policy.base.ChatTurn` becomes Responses-style
items, the assistant message sent back to the server, and (when the server returns ids) the
episode's token view. Used by :mod:`gymflow.rollout.driver` for :class:`~gymflow.policy.base.ChatPolicy`
backends; token backends never come here.
"""

from __future__ import annotations

import json

from gymflow.core.failures import FailureKind
from gymflow.core.tool_calls import strict_json
from gymflow.core.trajectory import assistant_items
from gymflow.policy.base import ChatTurn
from gymflow.rollout.episode import Episode


def chat_items(reply: ChatTurn, turn: int) -> list[dict]:
    """Items for one message-level turn: structured calls map to ``function_call`` items (their
    arguments parsed as strictly as text calls); otherwise the text goes through the strict
    text parser, so a model that writes ``<tool_call>`` text works too. Text sent alongside
    structured calls (a preamble) stays in the conversation, not in the items."""
    if not reply.tool_calls:
        return assistant_items(reply.text, turn)
    items = []
    for i, tc in enumerate(reply.tool_calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        raw = fn.get("arguments") if isinstance(fn, dict) else None
        try:
            # An object (some servers send one) is re-checked too: NaN or a lone surrogate in
            # it would break the env client and the rollout store downstream.
            args = strict_json(raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False))
        except (ValueError, RecursionError) as exc:
            args, problem = None, f"arguments are not strict JSON: {exc}"
        else:
            problem = "" if isinstance(args, dict) else "arguments must be a JSON object"
        if not isinstance(name, str) or not name:
            problem = "a tool call needs a function name"
        if problem:
            text = json.dumps(reply.tool_calls, ensure_ascii=False, default=str)
            return [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": text,
                    "parse_error": f"{FailureKind.INVALID_JSON}: {problem}",
                }
            ]
        items.append(
            {
                "type": "function_call",
                "call_id": f"call_{turn}_{i}",
                "name": name,
                "arguments": json.dumps(args, ensure_ascii=False),
            }
        )
    return items


def assistant_message(reply: ChatTurn, calls: list[dict], call_ids: list[str]) -> dict:
    """The assistant turn as it goes back to the server: calls structured, whatever their source
    (a hosted API refuses a tool result whose call id it has not seen)."""
    if not calls:
        return {"role": "assistant", "content": reply.text}
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for cid, c in zip(call_ids, calls, strict=True)
    ]  # fmt: skip
    content = reply.text if reply.tool_calls else None  # text calls live in tool_calls now
    return {"role": "assistant", "content": content or None, "tool_calls": tool_calls}


def extend_token_view(ep: Episode, reply: ChatTurn) -> None:
    """Append this turn's ids if the server's prompt ids extend the context exactly, else drop
    the view: re-rendering a conversation can tokenize the model's own text differently from
    how it was sampled, and a mismatched view would train on tokens the model never produced."""
    if not ep.has_token_view:
        return
    prompt, out, logps = reply.prompt_token_ids, reply.token_ids, reply.logprobs
    if prompt is None or out is None or logps is None or len(out) != len(logps):
        drop_token_view(ep)
        return
    if ep.turns == 1:
        ep.prompt_ids = list(prompt)
    else:
        context = len(ep.prompt_ids) + len(ep.completion_ids)
        if prompt[:context] != ep.prompt_ids + ep.completion_ids:
            drop_token_view(ep)
            return
        between = list(prompt[context:])
        ep.completion_ids += between
        ep.logprobs += [0.0] * len(between)
        ep.env_mask += [0] * len(between)
    ep.completion_ids += list(out)
    ep.logprobs += [float(x) for x in logps]
    ep.env_mask += [1] * len(out)


def drop_token_view(ep: Episode) -> None:
    ep.prompt_ids, ep.completion_ids, ep.logprobs, ep.env_mask = [], [], [], []
    ep.has_token_view = False
