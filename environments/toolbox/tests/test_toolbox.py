"""toolbox: the generator's levels and held-out unseen tools, the verifier's verdicts on
right, partial and wrong answers, and gold and probes through the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gymflow.core.tool_calls import parse_assistant_text, render_call
from gymflow.data.task_files import load_tasks
from gymflow.data.task_set import build_tasks
from gymflow.environments.toolbox.catalog import SEEN, UNSEEN
from gymflow.environments.toolbox.environment import ToolboxEnvironment
from gymflow.environments.toolbox.verifier import score
from gymflow.rollout.env_check import check_environment

ENV = ToolboxEnvironment()
UNSEEN_NAMES = {t.name for t in UNSEEN}
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(ENV, 600, 1, 0.1, 0.05)


def _items(text: str) -> list[dict]:
    from gymflow.core.trajectory import assistant_items

    return assistant_items(text, 0)


def _named(tasks, family: str, source: str = "seen"):
    return next(
        t
        for t in tasks
        if t.ground_truth["family"] == family and t.ground_truth["source"] == source
    )


def test_the_generator_is_seeded():
    assert ENV.generate(40, 7) == ENV.generate(40, 7)
    assert ENV.generate(40, 7) != ENV.generate(40, 8)


def test_unseen_tools_are_held_out_and_never_shown_to_training(tasks):
    shown = {
        split: {tool["function"]["name"] for t in tasks if t.split == split for tool in t.tools}
        for split in ("train", "val", "heldout")
    }
    assert not (shown["train"] | shown["val"]) & UNSEEN_NAMES
    assert shown["heldout"] >= UNSEEN_NAMES
    unseen = [t for t in tasks if t.ground_truth["source"] == "unseen"]
    assert unseen and all(t.split == "heldout" for t in unseen)
    assert 0.3 < len(unseen) / sum(t.split == "heldout" for t in tasks) < 0.7


def test_each_level_asks_for_its_number_of_calls(tasks):
    for t in tasks:
        level, calls = t.ground_truth["level"], parse_assistant_text(ENV.gold_text(t)).calls
        if t.ground_truth["family"] == "refusal":
            assert level == 1 and not calls
            names = {tool["function"]["name"] for tool in t.tools}
            assert len(names) == 3  # a box none of whose tools is the one asked for
        else:
            assert len(calls) == max(1, level), t
            assert {name for name, _ in calls} <= {tool["function"]["name"] for tool in t.tools}
    assert {t.ground_truth["level"] for t in tasks} == {0, 1, 2, 3}


def test_parallel_calls_match_in_any_order_and_partial_answers_earn_partial_reward(tasks):
    task = _named(tasks, "parallel2")
    gold = ENV.gold_text(task)
    first, second = (render_call(n, a) for n, a in parse_assistant_text(gold).calls)
    assert score(task.ground_truth, _items(second + first)).reward == 1.0
    short = score(task.ground_truth, _items(first))
    assert short.reward == pytest.approx(0.2) and not short.success
    name, args = parse_assistant_text(first).calls[0]
    key = next(iter(args))
    wrong = render_call(name, {**args, key: "nowhere"}) + second
    half = score(task.ground_truth, _items(wrong))
    assert half.failure_kind == "bad_arguments" and half.reward == pytest.approx(0.8)


def test_nested_arguments_are_checked_inside_the_object(tasks):
    task = next(
        t
        for t in tasks
        if t.ground_truth["family"] == "nested"
        and any(
            isinstance(v, dict) for v in parse_assistant_text(ENV.gold_text(t)).calls[0][1].values()
        )
    )
    name, args = parse_assistant_text(ENV.gold_text(task)).calls[0]
    key = next(k for k, v in args.items() if isinstance(v, dict))
    inner = next(iter(args[key]))
    broken = {**args, key: {**args[key], inner: "999"}}
    assert score(task.ground_truth, _items(render_call(name, args))).success
    verdict = score(task.ground_truth, _items(render_call(name, broken)))
    assert not verdict.success and verdict.failure_kind == "bad_arguments"


def test_declining_takes_words_and_calling_anyway_is_wrong(tasks):
    task = _named(tasks, "refusal")
    assert score(task.ground_truth, _items("None of these tools can do that.")).success
    assert score(task.ground_truth, _items("")).failure_kind == "no_answer"
    first = task.tools[0]["function"]["name"]
    called = score(task.ground_truth, _items(render_call(first, {})))
    assert called.failure_kind == "wrong_tool" and called.reward == pytest.approx(0.2)
    # and on a task that needs a call, declining is a format failure
    assert score(_named(tasks, "single").ground_truth, _items("I cannot.")).reward == -1.0


def test_a_task_shows_its_own_toolbox_to_the_model(tasks):
    task = _named(tasks, "parallel3", "unseen")
    assert ENV.tool_schemas == [] and len(task.tools) >= 3
    names = [tool["function"]["name"] for tool in task.tools]
    assert names == [doc["name"] for doc in task.ground_truth["functions"]]
    assert set(names) & UNSEEN_NAMES
    props = {tool["function"]["name"]: tool["function"]["parameters"] for tool in task.tools}
    assert all(p["type"] == "object" for p in props.values())  # BFCL's "dict" as JSON schema


def test_gold_and_probes_through_the_server():
    golds, probes, problems = check_environment(ENV, 120)
    assert golds == 120 and probes > 5 * golds and problems == []


def test_examples_load_and_their_gold_rollouts_score_one():
    examples = load_tasks(ENV, EXAMPLES / "tasks.jsonl")
    assert {t.ground_truth["family"] for t in examples.values()} == {
        "single", "nested", "refusal", "parallel2", "parallel3"
    }  # fmt: skip
    rows = [json.loads(line) for line in (EXAMPLES / "rollouts.jsonl").read_text().splitlines()]
    gold = [r for r in rows if r["response"].get("model") == "scripted-gold"]
    assert len(gold) == 5 and all(r["reward"] == 1.0 for r in gold)


def test_the_catalog_names_are_unique():
    names = [t.name for t in SEEN + UNSEEN]
    assert len(names) == len(set(names))
