"""The tool_call verifier and environment: gold answers, probes and every reward component."""

from __future__ import annotations

import json

import pytest

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.environments.tool_call import ToolCallEnvironment, verifier
from gymflow.environments.tool_call.tools import TOOLS

ENV = ToolCallEnvironment()


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(ENV, 500, 20240, 0.1, 0.05)


def grade(truth: dict, text: str) -> Score:
    return verifier.score(truth, assistant_items(text, 0))


def call(name: str, arguments: dict) -> str:
    return render_call(name, arguments)


EVENT = {"tool": "create_event", "arguments": {"title": "standup", "day": "monday", "hour": 9}}
EMAIL = {"tool": "send_email", "arguments": {"to": "alice@acme.com", "subject": "budget review"}}
TIMER = {"tool": "set_timer", "arguments": {"minutes": 5}}
WEATHER = {"tool": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}


# --- the generated task set -------------------------------------------------------------------


def test_tasks_cover_every_tool_and_split(tasks):
    assert len(tasks) > 300  # duplicates are dropped, most of 500 survive
    assert {t.ground_truth["tool"] for t in tasks} == {fn.__name__ for fn in TOOLS}
    assert {t.split for t in tasks} == {"train", "val", "heldout"}
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.tools == ENV.tool_schemas for t in tasks)


def test_generation_is_deterministic(tasks):
    again = build_tasks(ENV, 500, 20240, 0.1, 0.05)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    other = build_tasks(ENV, 50, 1, 0.1, 0.05)
    assert [t.task_id for t in other] != [t.task_id for t in tasks[:50]]


def test_every_gold_answer_scores_one(tasks):
    for task in tasks:
        score = ENV.verify(
            task, prompt_items(task.prompt) + assistant_items(ENV.gold_text(task), 0)
        )
        assert score.reward == 1.0, (task.ground_truth, score)
        assert score.success is True
        assert score.failure_kind is None
        assert score.components == {"format": 1.0, "tool": 1.0, "args": 1.0, "safe": 1.0}


def test_gold_arguments_are_valid_for_the_tool(tasks):
    for task in tasks:
        spec = ENV.tool_specs[task.ground_truth["tool"]]
        assert spec.validate(task.ground_truth["arguments"])  # raises if not


def test_no_probe_beats_its_ceiling_or_succeeds(tasks):
    seen_names: set[str] = set()
    for task in tasks:
        probes = ENV.probes(task)
        names = [p.name for p in probes]
        assert len(names) == len(set(names))
        gold = ENV.gold_text(task)
        for probe in probes:
            assert probe.text != gold, probe.name
            score = ENV.verify(task, assistant_items(probe.text, 0))
            assert score.reward <= probe.max_reward, (task.ground_truth, probe, score)
            assert not score.success, (task.ground_truth, probe, score)
            assert score.failure_kind is not None
            seen_names.add(probe.name)
    assert {"trailing_garbage", "unclosed_call", "bare_json", "repeated_call"} <= seen_names
    assert {"string_typed_args", "outside_domain", "extra_argument"} <= seen_names


def test_format_probes_score_minus_one(tasks):
    task = next(t for t in tasks if t.ground_truth["tool"] == "send_email")
    for probe in ENV.probes(task):
        score = ENV.verify(task, assistant_items(probe.text, 0))
        if probe.max_reward == -1.0:
            assert score.reward == -1.0, probe.name
            assert score.components["format"] == 0.0
        else:
            assert score.reward >= 0.0, probe.name


# --- hand-written cases, one per reward component ---------------------------------------------


def test_exact_call_is_success():
    score = grade(EVENT, call("create_event", EVENT["arguments"]))
    assert score == Score(
        1.0, True, None, {"format": 1.0, "tool": 1.0, "args": 1.0, "safe": 1.0}, ""
    )


def test_argument_order_does_not_matter():
    score = grade(EVENT, call("create_event", {"hour": 9, "day": "monday", "title": "standup"}))
    assert score.reward == 1.0 and score.success


def test_right_tool_wrong_argument_gets_partial_credit():
    score = grade(EVENT, call("create_event", {"title": "standup", "day": "monday", "hour": 10}))
    assert score.reward == pytest.approx(0.4 + 0.4 * 2 / 3 + 0.2, abs=1e-6)
    assert score.components == pytest.approx({"format": 1, "tool": 1, "args": 2 / 3, "safe": 1})
    assert not score.success
    assert score.failure_kind is FailureKind.BAD_ARGUMENTS


@pytest.mark.parametrize(
    ("arguments", "fraction"),
    [
        ({"title": "standup", "day": "monday", "hour": 9}, 1.0),
        ({"title": "standup", "day": "tuesday", "hour": 9}, 2 / 3),
        ({"title": "retro", "day": "tuesday", "hour": 9}, 1 / 3),
        ({"title": "retro", "day": "tuesday", "hour": 10}, 0.0),
    ],
)
def test_argument_credit_is_the_matching_fraction(arguments, fraction):
    score = grade(EVENT, call("create_event", arguments))
    assert score.reward == pytest.approx(0.4 + 0.4 * fraction + 0.2, abs=1e-6)
    assert score.success is (fraction == 1.0)


def test_email_outside_the_domain_loses_the_safety_credit():
    outside = grade(EMAIL, call("send_email", {**EMAIL["arguments"], "to": "alice@evil.example"}))
    inside = grade(EMAIL, call("send_email", {**EMAIL["arguments"], "to": "bob@acme.com"}))
    assert inside.reward == pytest.approx(0.8)  # same arguments fraction (1/2), safe
    assert outside.reward == pytest.approx(0.6)
    assert inside.reward - outside.reward == pytest.approx(0.2)
    assert outside.components["safe"] == 0.0
    assert outside.failure_kind is FailureKind.UNSAFE_ACTION
    assert inside.failure_kind is FailureKind.BAD_ARGUMENTS
    assert not outside.success


@pytest.mark.parametrize(
    "to",
    [
        "alice@acme.com.evil.example",
        "alice@ACME.com",
        "alice@evil@acme.com",
        "@acme.com",
        "alice",
        "",
    ],
)
def test_lookalike_recipients_are_unsafe(to):
    score = grade(EMAIL, call("send_email", {**EMAIL["arguments"], "to": to}))
    assert score.failure_kind is FailureKind.UNSAFE_ACTION
    assert score.components["safe"] == 0.0


def test_recipient_of_the_wrong_type_is_unsafe():
    score = grade(EMAIL, call("send_email", {"to": ["alice@acme.com"], "subject": "budget review"}))
    assert score.components["safe"] == 0.0
    assert score.failure_kind is FailureKind.UNSAFE_ACTION


def test_string_for_int_is_not_a_match():
    score = grade(TIMER, call("set_timer", {"minutes": "5"}))
    assert score.reward == pytest.approx(0.6)
    assert score.components["args"] == 0.0
    assert score.failure_kind is FailureKind.BAD_ARGUMENTS
    assert "minutes" in score.detail


@pytest.mark.parametrize("value", [5.0, True, [5], None])
def test_other_lookalike_types_are_not_a_match(value):
    score = grade(TIMER, call("set_timer", {"minutes": value}))
    assert score.components["args"] == 0.0
    assert not score.success


def test_extra_argument_counts_against_the_match():
    score = grade(TIMER, call("set_timer", {"minutes": 5, "force": True}))
    assert score.components["args"] == pytest.approx(1 / 2)
    assert score.reward == pytest.approx(0.8)
    assert score.failure_kind is FailureKind.BAD_ARGUMENTS
    assert "force" in score.detail


def test_omitted_default_matches_the_gold_default():
    assert grade(WEATHER, call("get_weather", {"city": "Oslo"})).reward == 1.0
    gold_without_default = {"tool": "get_weather", "arguments": {"city": "Oslo"}}
    assert grade(gold_without_default, call("get_weather", WEATHER["arguments"])).reward == 1.0
    wrong_unit = grade(WEATHER, call("get_weather", {"city": "Oslo", "unit": "fahrenheit"}))
    assert wrong_unit.reward == pytest.approx(0.8)


def test_missing_required_argument():
    score = grade(EVENT, call("create_event", {"title": "standup", "day": "monday"}))
    assert score.components["args"] == pytest.approx(2 / 3)
    assert score.failure_kind is FailureKind.BAD_ARGUMENTS
    assert "hour" in score.detail


def test_no_arguments_gets_tool_and_safety_only():
    score = grade(EVENT, call("create_event", {}))
    assert score.reward == pytest.approx(0.6)
    assert score.components["args"] == 0.0


def test_unknown_tool_gets_only_the_safety_credit():
    score = grade(TIMER, call("delete_everything", {"minutes": 5}))
    assert score.reward == pytest.approx(0.2)
    assert score.failure_kind is FailureKind.UNKNOWN_TOOL
    assert score.components == {"format": 1.0, "tool": 0.0, "args": 0.0, "safe": 1.0}


def test_wrong_tool_gets_only_the_safety_credit():
    score = grade(TIMER, call("get_weather", {"city": "Oslo"}))
    assert score.reward == pytest.approx(0.2)
    assert score.failure_kind is FailureKind.WRONG_TOOL


def test_wrong_tool_that_is_also_unsafe_gets_nothing():
    score = grade(TIMER, call("send_email", {"to": "x@evil.example", "subject": "hi"}))
    assert score.reward == 0.0
    assert score.failure_kind is FailureKind.WRONG_TOOL
    assert score.components["safe"] == 0.0


@pytest.mark.parametrize(
    "text",
    [
        call("set_timer", {"minutes": 5}) + '"}}',
        call("set_timer", {"minutes": 5})[: -len("</tool_call>")],
        '<tool_call>{"name": "set_timer", "arguments": {"minutes": 5}</tool_call>',
        '<tool_call>{"tool": "set_timer"}</tool_call>',
        "Here you go: " + call("set_timer", {"minutes": 5}),
    ],
)
def test_invalid_json_scores_minus_one(text):
    score = grade(TIMER, text)
    assert score.reward == -1.0
    assert score.failure_kind is FailureKind.INVALID_JSON
    assert score.components == {"format": 0.0, "tool": 0.0, "args": 0.0, "safe": 0.0}
    assert score.detail.startswith("invalid_json: ")


@pytest.mark.parametrize(
    "text",
    ["", "Sure, a 5 minute timer.", json.dumps({"name": "set_timer", "arguments": {"minutes": 5}})],
)
def test_no_tool_call_scores_minus_one(text):
    score = grade(TIMER, text)
    assert score.reward == -1.0
    assert score.failure_kind is FailureKind.NO_TOOL_CALL


def test_multiple_calls_score_minus_one_even_if_one_is_gold():
    gold = call("set_timer", {"minutes": 5})
    for text in (gold + gold, call("get_weather", {"city": "Oslo"}) + gold):
        score = grade(TIMER, text)
        assert score.reward == -1.0
        assert score.failure_kind is FailureKind.MULTIPLE_CALLS


def test_a_call_plus_an_assistant_message_is_multiple_outputs():
    items = assistant_items("Let me set it.", 0) + assistant_items(
        call("set_timer", {"minutes": 5}), 1
    )
    score = verifier.score(TIMER, items)
    assert score.reward == -1.0
    assert score.failure_kind is FailureKind.MULTIPLE_CALLS


def test_prompt_and_tool_outputs_are_not_outputs():
    items = (
        [{"type": "message", "role": "system", "content": "be brief"}]
        + prompt_items([{"role": "user", "content": "5 minute timer"}])
        + assistant_items(call("set_timer", {"minutes": 5}), 0)
        + [{"type": "function_call_output", "call_id": "call_0_0", "output": "{}"}]
    )
    assert verifier.score(TIMER, items).reward == 1.0


@pytest.mark.parametrize(
    "item",
    [
        {"type": "function_call", "name": "set_timer", "arguments": "{not json"},
        {"type": "function_call", "name": "set_timer", "arguments": {"minutes": 5}},  # not a string
        {"type": "function_call", "name": "set_timer"},  # arguments missing
        {"type": "function_call", "name": "set_timer", "arguments": "[5]"},
        {"type": "function_call", "name": 5, "arguments": '{"minutes": 5}'},
        {"type": "function_call", "name": "set_timer", "arguments": "[" * 100_000},
    ],
)
def test_hand_built_items_with_broken_calls_are_invalid_json(item):
    score = verifier.score(TIMER, [item])
    assert score.reward == -1.0
    assert score.failure_kind is FailureKind.INVALID_JSON


def test_non_ascii_arguments_are_compared_exactly():
    truth = {"tool": "send_email", "arguments": {"to": "zoe@acme.com", "subject": "café ☕"}}
    assert grade(truth, call("send_email", truth["arguments"])).reward == 1.0
    decomposed = {
        "to": "zoe@acme.com",
        "subject": "cafe\u0301 ☕",
    }  # same glyphs, other code points
    assert grade(truth, call("send_email", decomposed)).reward == pytest.approx(0.8)


def test_scoring_is_deterministic_and_pure():
    cases = [
        (EVENT, call("create_event", {"title": "standup", "day": "monday", "hour": 10})),
        (EMAIL, call("send_email", {"to": "a@evil.example", "subject": "x"})),
        (TIMER, call("set_timer", {"minutes": 5}) + '"}}'),
        (TIMER, call("set_timer", {"minutes": 5})),
    ]
    for truth, text in cases:
        truth_before = json.dumps(truth, sort_keys=True)
        items = assistant_items(text, 0)
        items_before = json.dumps(items, sort_keys=True)
        first, second = verifier.score(truth, items), verifier.score(truth, items)
        assert first == second
        assert first.to_dict() == second.to_dict()
        assert json.dumps(truth, sort_keys=True) == truth_before
        assert json.dumps(items, sort_keys=True) == items_before


def test_score_to_dict_is_json_ready():
    data = grade(EMAIL, call("send_email", {"to": "a@evil.example", "subject": "x"})).to_dict()
    assert data["failure_kind"] == "unsafe_action"
    assert json.loads(json.dumps(data)) == data
    assert grade(TIMER, call("set_timer", {"minutes": 5})).to_dict()["failure_kind"] is None


def test_rewards_stay_in_range_for_every_tool_and_argument_mix():
    for truth in (EVENT, EMAIL, TIMER, WEATHER):
        for fn in TOOLS:
            for arguments in (
                {},
                truth["arguments"],
                {"x": 1},
                {k: None for k in truth["arguments"]},
            ):
                score = grade(truth, call(fn.__name__, arguments))
                assert -1.0 <= score.reward <= 1.0
                assert score.success is (score.reward == 1.0)
