"""One proxied episode as the capturing proxy records it, and the rollout it becomes.

The proxy (:mod:`gymflow.agent.proxy`) appends a :class:`ModelCall` for every chat completion
the agent asks for — the messages and tools it sent, and the backend's answer as a
:class:`~gymflow.policy.base.ChatTurn`: text, structured tool calls, and the token ids and
sampling logprobs the backend returned (never re-tokenized here) — and a :class:`ToolCall`
for every tool the agent ran through the proxy's environment endpoint.

:meth:`Capture.episode` turns the record into the driver's :class:`~gymflow.rollout.episode.Episode`,
so the one store builds its row and GRPO trains on it like any other:

* items: the task's prompt, then for each model call its Responses items (structured calls
  become ``function_call`` items with the backend's call ids; text goes through the strict
  parser, as in-process) followed by the tool outputs that answered it — the ones run through
  the proxy, or else the ``tool`` messages the agent sent with its next request;
* the token view: every call's prompt ids must extend the previous context (prompt +
  completions so far) exactly, the tokens in between (tool results, the next assistant header)
  being the environment's (``env_mask`` 0, logprob 0) and each completion the model's
  (``env_mask`` 1, the backend's logprobs): one trajectory however many calls. When a call's
  prompt does not extend the context (the agent rewrote its history, the backend rendered the
  model's turn to other tokens) or the backend sent no ids, the episode keeps its items and
  score but has no token view (``has_token_view`` False): it can be evaluated, not trained on.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from gymflow.core.task_record import Task
from gymflow.core.trajectory import prompt_items
from gymflow.policy.base import ChatTurn
from gymflow.rollout.chat_turns import chat_items, extend_token_view
from gymflow.rollout.episode import Episode


@dataclass(frozen=True)
class ModelCall:
    messages: list[dict]
    """The conversation the agent sent (OpenAI chat format)."""
    tools: list[dict] | None
    """The tools it offered the model."""
    turn: ChatTurn
    """The backend's answer: text, tool calls, prompt/completion ids and logprobs."""
    seed: int | None
    latency_s: float


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict
    output: str
    """What the tool answered, as the driver writes it (JSON of the output, or of the error)."""
    after_call: int
    """How many model calls the episode had made when the tool ran."""


@dataclass
class Capture:
    """Everything recorded of one proxied episode."""

    episode_id: str
    task: Task
    seed: int
    session_id: str
    started_at: float = field(default_factory=time.time)
    calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolCall] = field(default_factory=list)
    ended: bool = False

    def episode(self) -> Episode:
        """The record as the driver's episode (unscored: the caller verifies its ``items``)."""
        ep = Episode(task=self.task, seed=self.seed, session_id=self.session_id)
        ep.started_at = self.started_at
        ep.items = prompt_items(self.task.prompt)
        for i, call in enumerate(self.calls):
            if i > 0:
                ep.items += self._outputs_before(i, ep.items)
            ep.turns += 1
            for key, count in (call.turn.usage or {}).items():
                ep.usage[key] = ep.usage.get(key, 0) + int(count or 0)
            extend_token_view(ep, call.turn)
            ep.items += _items(call.turn, i)
            ep.truncated = not call.turn.finished
        ep.items += self._outputs_before(len(self.calls), ep.items)
        ep.tool_calls = sum(1 for it in ep.items if it["type"] == "function_call_output")
        ep.done = True
        ep.latency_s = time.time() - self.started_at
        return ep

    def _outputs_before(self, call: int, items: list[dict]) -> list[dict]:
        """The tool outputs that came between model call ``call - 1`` and ``call``."""
        pending = [it for it in _last_turn(items) if it["type"] == "function_call"]
        ran = [t for t in self.tools if t.after_call == call]
        if ran:  # run through the proxy: the environment's own answers
            out = []
            for k, tool in enumerate(ran):
                same = [it for it in pending if it["name"] == tool.name]
                call_id = same[0]["call_id"] if same else f"proxy_tool_{call}_{k}"
                if same:
                    pending.remove(same[0])
                out.append(
                    {"type": "function_call_output", "call_id": call_id, "output": tool.output}
                )
            return out
        if call >= len(self.calls):
            return []
        return [
            {
                "type": "function_call_output",
                "call_id": m.get("tool_call_id") or "",
                "output": _text(m),
            }
            for m in _trailing_tool_messages(self.calls[call].messages)
        ]


def _items(turn: ChatTurn, index: int) -> list[dict]:
    """A call's items, structured calls keeping the backend's call ids (the agent's tool
    messages answer those)."""
    items = chat_items(turn, index)
    ids = [tc.get("id") for tc in turn.tool_calls if isinstance(tc, dict)]
    calls = [it for it in items if it["type"] == "function_call"]
    if turn.tool_calls and len(ids) == len(calls) and all(isinstance(i, str) and i for i in ids):
        for item, call_id in zip(calls, ids, strict=True):
            item["call_id"] = call_id
    return items


def _last_turn(items: list[dict]) -> list[dict]:
    """The items of the last assistant turn (after the last output or prompt message)."""
    out: list[dict] = []
    for item in reversed(items):
        if item["type"] == "function_call_output" or (
            item["type"] == "message" and item.get("role") != "assistant"
        ):
            break
        out.insert(0, item)
    return out


def _trailing_tool_messages(messages: list[dict]) -> list[dict]:
    out: list[dict] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        out.insert(0, message)
    return out


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else json.dumps(content)
