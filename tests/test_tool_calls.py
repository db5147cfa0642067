"""The strict tool-call parser: only complete ``<tool_call>`` blocks of strict JSON are calls."""

from __future__ import annotations

import json

import pytest

from gymflow.core.failures import FailureKind
from gymflow.core.tool_calls import CALL_CLOSE, CALL_OPEN, parse_assistant_text, render_call
from gymflow.core.trajectory import assistant_items

GOLD = render_call("set_timer", {"minutes": 5})


def block(body: str) -> str:
    return CALL_OPEN + body + CALL_CLOSE


def assert_invalid(text: str) -> None:
    parsed = parse_assistant_text(text)
    assert parsed.error is FailureKind.INVALID_JSON, parsed
    assert parsed.calls == []
    assert parsed.error_detail


def test_one_call_round_trips_through_render_call():
    parsed = parse_assistant_text(GOLD)
    assert parsed.error is None
    assert parsed.calls == [("set_timer", {"minutes": 5})]
    assert parsed.text == ""


def test_surrounding_whitespace_is_allowed():
    assert parse_assistant_text(f"\n  {GOLD} \n\n").calls == [("set_timer", {"minutes": 5})]


def test_plain_text_is_a_final_answer_not_an_error():
    parsed = parse_assistant_text("  The timer is set.  ")
    assert parsed == parse_assistant_text("The timer is set.")
    assert parsed.error is None and parsed.calls == [] and parsed.text == "The timer is set."


def test_empty_text_is_an_empty_answer():
    parsed = parse_assistant_text("")
    assert parsed.error is None and parsed.calls == [] and parsed.text == ""


def test_bare_json_without_markers_is_plain_text_not_a_call():
    text = json.dumps({"name": "set_timer", "arguments": {"minutes": 5}})
    parsed = parse_assistant_text(text)
    assert parsed.calls == [] and parsed.error is None and parsed.text == text


@pytest.mark.parametrize(
    "text",
    [
        GOLD + '"}}',  # the reward hack a lenient parser fell for
        GOLD + " done",
        GOLD + CALL_CLOSE,
        GOLD + CALL_OPEN,
        "Sure! " + GOLD,
        GOLD[: -len(CALL_CLOSE)],  # unclosed block
        CALL_OPEN + '{"name": "set_timer", "arguments": {"minutes": 5}}',
        '{"name": "set_timer", "arguments": {"minutes": 5}}' + CALL_CLOSE,
        CALL_OPEN,
        CALL_CLOSE,
        "I will not use " + CALL_OPEN + " today",
        GOLD + " and then " + GOLD,  # text between blocks
        CALL_OPEN + GOLD,  # a nested opening marker
    ],
)
def test_text_outside_or_unterminated_blocks_is_invalid(text):
    assert_invalid(text)


@pytest.mark.parametrize(
    "body",
    [
        "",
        "   ",
        "not json",
        '{"name": "set_timer", "arguments": {"minutes": 5}',  # unbalanced
        '{"name": "set_timer", "arguments": {"minutes": 5}}}',  # one brace too many
        "{'name': 'set_timer', 'arguments': {}}",  # Python, not JSON
        '{"name": "set_timer", "arguments": {"minutes": 5,}}',  # trailing comma
    ],
)
def test_block_that_is_not_json_is_invalid(body):
    assert_invalid(block(body))
    assert "not JSON" in parse_assistant_text(block(body)).error_detail


@pytest.mark.parametrize(
    "obj",
    [
        {"tool": "set_timer"},  # legacy shape
        {"name": "set_timer"},  # arguments missing
        {"arguments": {"minutes": 5}},  # name missing
        {"name": "set_timer", "arguments": {}, "id": 1},  # an extra key
        {"function": {"name": "set_timer", "arguments": {}}},  # OpenAI wire shape
        {"name": 5, "arguments": {}},  # name not a string
        {"name": None, "arguments": {}},
        {"name": "set_timer", "arguments": '{"minutes": 5}'},  # arguments as a string
        {"name": "set_timer", "arguments": [5]},  # arguments not an object
        {"name": "set_timer", "arguments": None},
        {"name": "set_timer", "arguments": 5},
    ],
)
def test_wrong_keys_or_types_are_invalid(obj):
    assert_invalid(block(json.dumps(obj)))


@pytest.mark.parametrize("value", ["[1, 2]", '"set_timer"', "5", "null", "true"])
def test_block_must_hold_an_object(value):
    assert_invalid(block(value))


def test_multiple_blocks_are_parsed_in_order():
    text = render_call("get_weather", {"city": "Oslo"}) + "\n" + GOLD
    parsed = parse_assistant_text(text)
    assert parsed.error is None
    assert parsed.calls == [("get_weather", {"city": "Oslo"}), ("set_timer", {"minutes": 5})]


def test_one_bad_block_among_good_ones_invalidates_the_turn():
    assert_invalid(GOLD + block('{"name": "x"}') + GOLD)


def test_empty_arguments_are_a_valid_call():
    assert parse_assistant_text(render_call("get_weather", {})).calls == [("get_weather", {})]


def test_non_ascii_arguments_survive_raw_and_escaped():
    args = {"subject": "Café ☕ 東京 — ünïcödé", "to": "zoë@acme.com"}
    raw = block(json.dumps({"name": "send_email", "arguments": args}, ensure_ascii=False))
    escaped = block(json.dumps({"name": "send_email", "arguments": args}))
    assert "\\u" in escaped
    assert parse_assistant_text(raw).calls == [("send_email", args)]
    assert parse_assistant_text(escaped).calls == [("send_email", args)]
    (item,) = assistant_items(raw, 3)
    assert item["name"] == "send_email" and json.loads(item["arguments"]) == args
    assert "☕" in item["arguments"]  # kept readable, not escaped


def test_non_ascii_tool_name_is_still_a_call():
    assert parse_assistant_text(render_call("météo", {})).calls == [("météo", {})]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant):
    assert_invalid(block('{"name": "set_timer", "arguments": {"minutes": ' + constant + "}}"))


def test_duplicate_keys_are_ambiguous_and_refused():
    assert_invalid(block('{"name": "a", "name": "b", "arguments": {}}'))
    detail = parse_assistant_text(
        block('{"name": "set_timer", "arguments": {"minutes": 5, "minutes": "5"}}')
    ).error_detail
    assert "duplicate key 'minutes'" in detail


def test_lone_surrogate_is_refused():
    # json.loads accepts "\ud800", but it cannot be encoded as UTF-8 to send to the env server
    assert_invalid(block('{"name": "send_email", "arguments": {"subject": "\\ud800"}}'))
    assert_invalid(block('{"name": "f", "arguments": {"x": [["\\udfff"]]}}'))
    # a proper surrogate pair is fine
    assert parse_assistant_text(
        block('{"name": "f", "arguments": {"x": "\\ud83d\\ude00"}}')
    ).calls == [("f", {"x": "😀"})]


def test_deeply_nested_json_is_invalid_not_a_crash():
    assert_invalid(block("[" * 100_000))
    nested = '{"name": "f", "arguments": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    assert_invalid(block(nested))


def test_closing_marker_inside_a_string_cannot_smuggle_text():
    # non-greedy matching ends the block at the first </tool_call>: what follows is garbage
    text = block('{"name": "f", "arguments": {"x": "' + CALL_CLOSE + '"}}')
    assert_invalid(text)


def test_parse_is_deterministic_and_does_not_share_state():
    first = parse_assistant_text(GOLD)
    first.calls[0][1]["minutes"] = 99
    assert parse_assistant_text(GOLD).calls == [("set_timer", {"minutes": 5})]


def test_assistant_items_for_calls_messages_and_errors():
    calls = assistant_items(GOLD + GOLD, 2)
    assert [it["call_id"] for it in calls] == ["call_2_0", "call_2_1"]
    assert all(it["type"] == "function_call" for it in calls)
    assert json.loads(calls[0]["arguments"]) == {"minutes": 5}

    (message,) = assistant_items("All done.", 0)
    assert message == {"type": "message", "role": "assistant", "content": "All done."}

    (broken,) = assistant_items(GOLD + '"}}', 0)
    assert broken["type"] == "message"
    assert broken["parse_error"].startswith("invalid_json: ")
    assert broken["content"] == GOLD + '"}}'
