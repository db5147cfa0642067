"""Trajectory items read back: the final assistant message every verifier scores."""

from __future__ import annotations

import doctest

import pytest

from gymflow.core import trajectory
from gymflow.core.trajectory import (
    assistant_items,
    final_assistant_message,
    final_assistant_text,
    prompt_items,
)

PROMPT = prompt_items(
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
)
CALL = {"type": "function_call", "call_id": "c0", "name": "add", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c0", "output": "4"}


def say(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": text}


@pytest.mark.parametrize(
    ("items", "text"),
    [
        ([*PROMPT, say("4")], "4"),
        ([*PROMPT, CALL, OUTPUT, say("it is 4")], "it is 4"),  # the answer after the tools
        ([*PROMPT, say("first"), say("second")], "second"),
        ([*PROMPT], ""),  # the user's message is never the answer
        ([*PROMPT, CALL, OUTPUT], ""),  # ended on tool use: no answer
        ([*PROMPT, say("4"), CALL, OUTPUT], ""),  # a later call supersedes an earlier message
        ([*PROMPT, {"type": "message", "role": "assistant", "content": None}], ""),
        ([], ""),
    ],
)
def test_final_assistant_text(items, text):
    assert final_assistant_text(items) == text


def test_final_message_keeps_the_parse_error():
    items = [*PROMPT, *assistant_items('<tool_call>{"name": "add"', 0)]
    message = final_assistant_message(items)
    assert message is not None and message["parse_error"]
    assert final_assistant_text(items) == '<tool_call>{"name": "add"'


def test_docstring_examples_hold():
    assert doctest.testmod(trajectory).failed == 0
