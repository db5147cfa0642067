"""BFCL tasks in tool_call: import as shipped, gold answers succeed, BFCL's AST rules hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError
from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import parse_assistant_text, render_call
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import load_tasks
from gymflow.environments.tool_call import ToolCallEnvironment, bfcl

DATA = Path(__file__).parent / "data" / "bfcl"
FILES = ("simple_python", "multiple", "parallel", "irrelevance")
ENV = ToolCallEnvironment()


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    found: dict[str, Task] = {}
    for name in FILES:
        found.update(load_tasks(ENV, DATA / f"BFCL_v4_{name}.json", "bfcl"))
    return found


def grade(task: Task, text: str) -> Score:
    return ENV.verify(task, prompt_items(task.prompt) + assistant_items(text, 0))


def call(name: str, **arguments: object) -> str:
    return render_call(name, arguments)


def test_rows_keep_bfcl_ids_and_become_tasks_with_json_schema_tools(tasks):
    assert len(tasks) == 100
    assert {t.task_id for t in tasks.values() if t.task_id.startswith("simple_python_")} == {
        f"simple_python_{i}" for i in range(30)
    }
    task = tasks["multiple_8"]
    assert task.split == "heldout" and task.env == "tool_call"
    assert task.prompt[0]["role"] == "user" and "villa" in task.prompt[0]["content"]
    tool = next(t for t in task.tools if t["function"]["name"] == "realestate.find_properties")
    params = tool["function"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["budget"]["type"] == "object"
    assert tasks["simple_python_14"].tools[0]["function"]["parameters"]["properties"]["x_value"][
        "type"
    ] == ("number")
    schemas = json.dumps([t.tools for t in tasks.values()])
    for bfcl_only in ('"dict"', '"float"', '"tuple"', '"any"'):
        assert f'"type": {bfcl_only}' not in schemas
    assert tasks["irrelevance_0"].ground_truth["bfcl"]["answer"] is None


def test_every_gold_answer_succeeds_as_text_and_as_function_call_items(tasks):
    for task in tasks.values():
        gold = ENV.gold_text(task)
        score = grade(task, gold)
        assert (score.reward, score.success, score.failure_kind) == (1.0, True, None), (
            task.task_id,
            score,
        )
        items = [
            {"type": "function_call", "call_id": f"c{i}", "name": n, "arguments": json.dumps(a)}
            for i, (n, a) in enumerate(parse_assistant_text(gold).calls)
        ]
        if items:
            assert ENV.verify(task, items).success, task.task_id


def test_no_probe_beats_its_ceiling(tasks):
    for task in tasks.values():
        for probe in ENV.probes(task):
            score = grade(task, probe.text)
            assert score.reward <= probe.max_reward and not score.success, (task.task_id, probe)


@pytest.mark.parametrize(
    ("task_id", "text", "kind", "error_type"),
    [
        ("multiple_8", call("property_valuation.get", location="SD"), "wrong_tool", "func_name"),
        ("simple_python_0", call("area_of_square", base=10, height=5), "unknown_tool", "func_name"),
        (
            "simple_python_0",
            call("calculate_triangle_area", base=11, height=5),
            "bad_arguments",
            "value_error:others",
        ),
        (
            "simple_python_13",
            call("calculate_area_under_curve", function="x**3", interval=[1.0, 3.0]),
            "bad_arguments",
            "value_error:string",
        ),
        (
            "simple_python_0",
            call("calculate_triangle_area", base=10),
            "bad_arguments",
            "missing_required",
        ),
        (
            "simple_python_0",
            call("calculate_triangle_area", base=10, height=5, color="red"),
            "bad_arguments",
            "unexpected_param",
        ),
        (
            "simple_python_0",
            call("calculate_triangle_area", base="10", height=5),
            "bad_arguments",
            "type_error:simple",
        ),
        (
            "simple_python_0",
            call("calculate_triangle_area", base=10.0, height=5),
            "bad_arguments",
            "type_error:simple",
        ),  # float for integer: no leniency that way
        (
            "simple_python_13",
            call("calculate_area_under_curve", function="x**2", interval=[1, 3]),
            "bad_arguments",
            "type_error:nested",
        ),  # int→float is not applied inside lists
        (
            "multiple_8",
            call(
                "realestate.find_properties",
                location="San Diego",
                propertyType="villa",
                bedrooms=3,
                budget={"min": 300000},
            ),
            "bad_arguments",
            "value_error:dict_key",
        ),
        (
            "irrelevance_0",
            call("determine_body_mass_index", weight=70.0, height=1.8),
            "wrong_tool",
            "irrelevance_error",
        ),
    ],
)
def test_each_wrong_call_fails_with_its_kind(tasks, task_id, text, kind, error_type):
    score = grade(tasks[task_id], text)
    assert score.success is False
    assert score.failure_kind == FailureKind(kind)
    assert error_type in score.detail
    assert score.components["format"] == 1.0
    assert 0.0 < score.reward < 1.0


def test_wrong_values_keep_the_tool_credit_wrong_tools_do_not(tasks):
    task = tasks["simple_python_0"]
    wrong_value = grade(task, call("calculate_triangle_area", base=11, height=5))
    wrong_tool = grade(task, call("area_of_square", base=10, height=5))
    assert wrong_value.reward == pytest.approx(0.6) and wrong_tool.reward == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("task_id", "text"),
    [
        ("simple_python_0", "I would call calculate_triangle_area."),  # no call
        ("simple_python_0", call("calculate_triangle_area", base=10, height=5) * 2),
        ("simple_python_0", '<tool_call>{"name": "calculate_triangle_area"}</tool_call>'),
        ("irrelevance_0", "<tool_call>not json</tool_call>"),  # broken, not "no call"
    ],
)
def test_malformed_or_missing_calls_score_minus_one(tasks, task_id, text):
    score = grade(tasks[task_id], text)
    assert (score.reward, score.success) == (-1.0, False)
    assert score.failure_kind in (
        FailureKind.NO_TOOL_CALL,
        FailureKind.MULTIPLE_CALLS,
        FailureKind.INVALID_JSON,
    )


@pytest.mark.parametrize(
    ("task_id", "text"),
    [
        ("simple_python_14", call("calculate_derivative", function="3x**2 + 2x - 1", x_value=0)),
        (
            "simple_python_13",
            call("calculate_area_under_curve", function="X ** 2", interval=[1.0, 3.0]),
        ),
        (
            "multiple_8",
            call(
                "realestate.find_properties",
                location="san-diego, ca",
                propertyType="Villa",
                bedrooms=3,
                budget={"min": 300000, "max": 400000},
            ),
        ),
        ("simple_python_0", call("calculate_triangle_area", base=10, height=5)),  # optional left
        ("simple_python_0", call("calculate_triangle_area", base=10, height=5, unit="UNITS")),
        ("simple_python_2", call("math_hypot", x=4, y=5)),  # dots as underscores
        (
            "parallel_0",
            call("spotify.play", artist="Maroon 5", duration=15)
            + call("spotify.play", artist="taylor swift", duration=20),
        ),  # any order
        ("irrelevance_0", "I cannot compute a triangle's area with a BMI tool."),
        ("irrelevance_0", ""),
    ],
)
def test_bfcl_leniencies_succeed(tasks, task_id, text):
    score = grade(tasks[task_id], text)
    assert (score.reward, score.success, score.failure_kind) == (1.0, True, None), score


def test_parallel_answers_need_every_call(tasks):
    task = tasks["parallel_0"]
    one = grade(task, call("spotify.play", artist="Maroon 5", duration=15))
    assert one.failure_kind == FailureKind.MULTIPLE_CALLS and "wrong_count" in one.detail
    half = grade(
        task,
        call("spotify.play", artist="Maroon 5", duration=15)
        + call("spotify.play", artist="Taylor Swift", duration=21),
    )
    assert half.failure_kind == FailureKind.BAD_ARGUMENTS and not half.success
    assert half.components["args"] == 0.5 and half.reward == pytest.approx(0.8)


def test_one_answer_spells_dotted_names_one_way(tasks):
    task = tasks["parallel_0"]
    a = {"artist": "Maroon 5", "duration": 15}
    b = {"artist": "Taylor Swift", "duration": 20}
    same = grade(task, render_call("spotify_play", a) + render_call("spotify_play", b))
    assert same.success
    mixed = grade(task, render_call("spotify_play", a) + render_call("spotify.play", b))
    assert not mixed.success and "mixed" in mixed.detail


def test_standardize_is_bfcls_normalisation():
    assert bfcl.standardize("New York, NY") == bfcl.standardize("new-york ny")
    assert bfcl.standardize("it's") == 'it"s'
    assert bfcl.standardize("Paris") != bfcl.standardize("Pariss")


def test_a_call_category_needs_its_possible_answers(tmp_path):
    rows = (DATA / "BFCL_v4_simple_python.json").read_text(encoding="utf-8")
    lone = tmp_path / "BFCL_v4_simple_python.json"
    lone.write_text(rows, encoding="utf-8")
    with pytest.raises(InputFileError, match="no possible answer for 'simple_python_0'"):
        load_tasks(ENV, lone, "bfcl")


def test_unsupported_categories_and_multi_turn_rows_are_refused(tmp_path):
    row = json.loads((DATA / "BFCL_v4_irrelevance.json").read_text().splitlines()[0])
    java = tmp_path / "BFCL_v4_simple_java.json"
    java.write_text(json.dumps({**row, "id": "simple_java_0"}) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="category 'simple_java' is not supported"):
        load_tasks(ENV, java, "bfcl")
    turns = tmp_path / "BFCL_v4_irrelevance.json"
    two = {**row, "question": row["question"] * 2}
    turns.write_text(json.dumps(two) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="exactly one turn"):
        load_tasks(ENV, turns, "bfcl")
