"""keybox's verifier, pure: ``(ground truth, trajectory items) -> Score``.

Success needs both halves of the skill: the episode **opened the box that holds the key** (a
call ``open_box`` with that label whose output was not an error) and its **final answer is that
box's label**, exactly. Naming the right label without having opened it is a lucky guess and
scores 0, so the only way to the reward is to look, and to read what the tool returned.
"""

from __future__ import annotations

import json

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_message, final_assistant_text


def opened(items: list[dict]) -> list[str]:
    """The labels of the boxes the episode opened, in order (calls whose output was an error,
    or that were not ``open_box`` calls with a string label, left out)."""
    outputs = {
        it.get("call_id"): it.get("output")
        for it in items
        if it.get("type") == "function_call_output"
    }
    labels = []
    for it in items:
        if it.get("type") != "function_call" or it.get("name") != "open_box":
            continue
        if _is_error(outputs.get(it.get("call_id"))):
            continue
        try:
            label = json.loads(it["arguments"]).get("label")
        except (json.JSONDecodeError, AttributeError, TypeError, KeyError):
            continue
        if isinstance(label, str):
            labels.append(label)
    return labels


def score(truth: dict, items: list[dict]) -> Score:
    """Reward 1 iff the key's box was opened and the final answer is its label, else 0.

    >>> call = {"type": "function_call", "call_id": "c0", "name": "open_box",
    ...         "arguments": '{"label": "red"}'}
    >>> out = {"type": "function_call_output", "call_id": "c0",
    ...        "output": '{"box": "red", "holds": "the key"}'}
    >>> answer = {"type": "message", "role": "assistant", "content": "red"}
    >>> score({"key": "red", "boxes": ["red", "blue", "green"]}, [call, out, answer]).reward
    1.0
    >>> score({"key": "red", "boxes": ["red", "blue", "green"]}, [answer]).reward
    0.0
    """
    key = truth["key"]
    seen = opened(items)
    found = key in seen
    message = final_assistant_message(items)
    answer = final_assistant_text(items).strip()
    comps = {"found": float(found), "answer": float(answer == key)}
    broken = [it for it in items if it.get("type") == "message" and it.get("parse_error")]
    if broken:
        return Score(0.0, False, FailureKind.INVALID_JSON, comps, broken[0]["parse_error"])
    if message is None:
        return Score(0.0, False, FailureKind.NO_ANSWER, comps, "no final answer")
    if answer != key:
        return Score(0.0, False, FailureKind.WRONG_ANSWER, comps, f"answered {answer[:40]!r}")
    if not found:
        return Score(
            0.0, False, FailureKind.WRONG_ANSWER, comps, "named the key's box without opening it"
        )
    return Score(1.0, True, None, comps, "")


def _is_error(output: str | None) -> bool:
    if output is None:
        return True
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return True
    return isinstance(value, dict) and "error" in value
