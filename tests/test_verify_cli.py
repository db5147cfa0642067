"""`gymflow verify`: score given responses without a model. Every line gets a score row: a
malformed one is the model's failure (``invalid_trajectory``), a verifier that raises is
``verifier_error`` for its line only; a bad tasks file exits 2 and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.jsonl import InputFileError
from gymflow.core.task_record import Task
from gymflow.data.task_files import importers, load_tasks
from gymflow.env.registry import get_env, list_envs
from gymflow.environments.tool_call import ToolCallEnvironment
from gymflow.eval.verify_files import summary, unscored, verify_files

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = Path(__file__).resolve().parents[1] / "environments/tool_call/examples/tasks.jsonl"
BFCL = Path(__file__).resolve().parents[1] / "environments/tool_call/tests/data/bfcl"
ENV = ToolCallEnvironment()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return list(load_tasks(ENV, EXAMPLES).values())


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run_verify(tmp_path: Path, responses: Path, *extra: str, tasks_file: Path = EXAMPLES):
    out = tmp_path / "scores.jsonl"
    args = ["verify", "--env", "tool_call", "--tasks", str(tasks_file)]
    args += ["--responses", str(responses), "--out", str(out), *extra]
    return runner.invoke(app, args), out


def scores(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_missing_tools_are_filled_from_the_environment(tasks):
    assert len(tasks) == 5
    assert all(task.tools == ENV.tool_schemas for task in tasks)


def test_gold_responses_score_one_in_input_order(tmp_path, tasks):
    rows = [{"task_id": t.task_id, "response": ENV.gold_text(t)} for t in reversed(tasks)]
    result, out = run_verify(tmp_path, write_rows(tmp_path / "r.jsonl", rows))
    assert result.exit_code == 0, result.output
    got = scores(out)
    assert [row["task_id"] for row in got] == [row["task_id"] for row in rows]
    for row in got:
        assert set(row) == {"task_id", "reward", "reward_components", "failure_kind", "success"}
        assert (row["reward"], row["failure_kind"], row["success"]) == (1.0, None, True)
    assert "5 responses scored" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "scores.jsonl"]


def test_output_items_with_the_right_call_score_one_and_a_wrong_argument_less(tmp_path, tasks):
    task = next(t for t in tasks if t.ground_truth["tool"] == "get_weather")
    args = task.ground_truth["arguments"]
    call = {"type": "function_call", "name": "get_weather", "call_id": "call_1"}
    right = [
        {**call, "arguments": json.dumps(args)},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'},
    ]
    wrong = [{**call, "arguments": json.dumps({**args, "city": "Atlantis"})}]
    rows = [{"task_id": task.task_id, "output": right}, {"task_id": task.task_id, "output": wrong}]
    result, out = run_verify(tmp_path, write_rows(tmp_path / "r.jsonl", rows))
    assert result.exit_code == 0, result.output
    good, bad = scores(out)
    assert (good["reward"], good["success"]) == (1.0, True)
    assert bad["reward"] < 1.0 and bad["failure_kind"] == "bad_arguments" and not bad["success"]
    assert bad["reward_components"]["tool"] == 1.0


def test_nemo_gym_rollout_rows_score_their_output_items(tmp_path, tasks):
    task = next(t for t in tasks if t.ground_truth["tool"] == "set_timer")
    call = {
        "type": "function_call",
        "name": "set_timer",
        "call_id": "call_1",
        "arguments": json.dumps(task.ground_truth["arguments"]),
        "id": "fc_1",
        "status": "completed",
    }
    params = {"input": [{"type": "message", **m} for m in task.prompt], "tools": []}
    rows = [
        {"responses_create_params": params, "response": {"output": [call]}, "reward": 1.0},
        {"task_id": task.task_id, "response": {"output": []}, "reward": 0.0},
    ]
    result, out = run_verify(tmp_path, write_rows(tmp_path / "r.jsonl", rows))
    assert result.exit_code == 0, result.output
    right, empty = scores(out)
    assert right["task_id"] == task.task_id and (right["reward"], right["success"]) == (1.0, True)
    assert (empty["reward"], empty["failure_kind"]) == (-1.0, "no_tool_call")


def test_malformed_answers_are_scored_not_errors(tmp_path, tasks):
    task = tasks[0]
    rows = [
        {"task_id": task.task_id, "response": '<tool_call>{"name": "set_timer"}}</tool_call>'},
        {
            "task_id": task.task_id,
            "output": [  # with a call_id: an item without one is invalid_trajectory (as over HTTP)
                {"type": "function_call", "name": "x", "arguments": "{not json", "call_id": "c"}
            ],
        },
    ]
    result, out = run_verify(tmp_path, write_rows(tmp_path / "r.jsonl", rows))
    assert result.exit_code == 0, result.output
    for row in scores(out):
        assert (row["reward"], row["failure_kind"], row["success"]) == (-1.0, "invalid_json", False)


def _good_line(task: Task) -> str:
    return json.dumps({"task_id": task.task_id, "response": ENV.gold_text(task)})


BAD_ROWS = {
    "malformed_json": ('{"task_id": "x", "response": ', "line 2: not valid JSON"),
    "neither": ('{"task_id": "TASK"}', "line 2: row has neither of 'response' and 'output'"),
    "both": (
        '{"task_id": "TASK", "response": "", "output": []}',
        "line 2: row has both of 'response' and 'output'",
    ),
    "response_neither_text_nor_object": (
        '{"task_id": "TASK", "response": 5}',
        "line 2: 'response' must be a string (the model's final text) or a NeMo Gym",
    ),
    "nemo_gym_rollout_of_no_task": (
        '{"responses_create_params": {"input": "hi"}, "response": {"output": []}}',
        "line 2: no task has this rollout's prompt",
    ),
    "arguments_not_a_string": (
        '{"task_id": "TASK", "output": [{"type": "function_call", "name": "f", "arguments": {}}]}',
        "line 2: output.0.function_call: 'arguments' must be a string",  # /verify's reading
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_bad_response_row_is_scored_invalid_trajectory_and_the_others_still_count(
    tmp_path, tasks, case
):
    line, message = BAD_ROWS[case]
    text = _good_line(tasks[0]) + "\n" + line.replace("TASK", tasks[0].task_id) + "\n"
    text += _good_line(tasks[1]) + "\n"
    responses = tmp_path / "r.jsonl"
    responses.write_text(text, encoding="utf-8")
    result, out = run_verify(tmp_path, responses)
    assert result.exit_code == 0, result.output
    first, bad, last = scores(out)
    assert first["success"] and last["success"]
    floor = ENV.invalid_trajectory_score("").reward  # the model's failure, as over HTTP
    assert (bad["reward"], bad["failure_kind"], bad["success"]) == (
        floor,
        "invalid_trajectory",
        False,
    )
    assert message in bad["detail"]
    assert "3 responses scored" in result.output and "invalid_trajectory 1" in result.output


@pytest.mark.parametrize(
    "line",
    ['{"task_id": "nope", "response": ""}', '{"task_id": "nope", "response": {"output": []}}'],
    ids=["text", "nemo_gym_rollout"],
)
def test_an_unknown_task_id_is_unscored_kept_out_of_the_mean_and_exits_2(tmp_path, tasks, line):
    """Not the model's failure: no reward (the mean is over the others), exit 2 naming it."""
    text = _good_line(tasks[0]) + "\n" + line + "\n" + _good_line(tasks[1]) + "\n"
    responses = tmp_path / "r.jsonl"
    responses.write_text(text, encoding="utf-8")
    result, out = run_verify(tmp_path, responses)
    assert result.exit_code == 2, result.output
    first, unknown, last = scores(out)
    assert (unknown["reward"], unknown["failure_kind"]) == (None, "unknown_task")
    assert unknown["detail"] == "line 2: unknown task_id 'nope' (not in the tasks file)"
    assert "mean reward 1.000, 2 successes (1 without a reward)" in result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: [unknown_task] 1 line(s) name a task_id the tasks file does not hold (line 2); "
        "they have no reward and are not in the mean: check --tasks and --format"
    )


def test_non_utf8_bytes_are_one_invalid_line(tmp_path, tasks):
    responses = tmp_path / "r.jsonl"
    responses.write_bytes(
        (_good_line(tasks[0]) + "\n").encode()
        + b'{"task_id": "x", "response": "caf\xe9"}\n'  # Latin-1, not UTF-8
    )
    result, out = run_verify(tmp_path, responses)
    assert result.exit_code == 0, result.output
    good, bad = scores(out)
    assert good["success"] and bad["failure_kind"] == "invalid_trajectory"
    assert "line 2: not UTF-8 (byte 0xe9" in bad["detail"]


def test_bad_tasks_file_exits_2_and_keeps_an_existing_scores_file(tmp_path, tasks):
    bad_tasks = tmp_path / "t.jsonl"
    bad_tasks.write_text(EXAMPLES.read_text(encoding="utf-8") + "{oops\n", encoding="utf-8")
    responses = write_rows(tmp_path / "r.jsonl", [{"task_id": tasks[0].task_id, "response": ""}])
    (tmp_path / "scores.jsonl").write_text("previous\n")
    result, out = run_verify(tmp_path, responses, tasks_file=bad_tasks)
    assert result.exit_code == 2
    assert "t.jsonl:6: not valid JSON" in result.stderr
    assert out.read_text() == "previous\n"

    schema_bad = tmp_path / "t2.jsonl"
    write_rows(schema_bad, [{"task_id": "a", "env": "tool_call"}])
    result, _ = run_verify(tmp_path, responses, tasks_file=schema_bad)
    assert result.exit_code == 2
    assert "t2.jsonl:1: not a gymflow task: split: Field required" in result.stderr


def test_unknown_format_and_env_name_the_known_ones(tmp_path, tasks):
    responses = write_rows(tmp_path / "r.jsonl", [{"task_id": tasks[0].task_id, "response": ""}])
    result, out = run_verify(tmp_path, responses, "--format", "swebench")
    assert result.exit_code == 2
    assert "unknown task format 'swebench'" in result.stderr
    assert "known formats: bfcl, gymflow" in result.stderr
    assert not out.exists()
    result = runner.invoke(
        app, ["verify", "--env", "nope", "--tasks", "t", "--responses", "r", "--out", "o"]
    )
    assert result.exit_code == 2 and "unknown environment 'nope'" in result.stderr


def test_an_environment_adds_a_format_with_one_function(tmp_path):
    def flat(row: dict) -> Task:
        prompt = [{"role": "user", "content": row["question"]}]
        truth = {"tool": row["tool"], "arguments": row["args"]}
        return Task(
            task_id=row["id"],
            env="tool_call",
            split="heldout",
            prompt=prompt,
            tools=[],
            ground_truth=truth,
            generator="external/flat",
            seed=0,
            content_hash="",
        )

    class WithFlat(ToolCallEnvironment):
        def importers(self):
            return {"flat": flat}

    env = WithFlat()
    assert sorted(importers(env)) == ["flat", "gymflow"]
    path = write_rows(
        tmp_path / "flat.jsonl",
        [{"id": "ext-7", "question": "Timer 5 min", "tool": "set_timer", "args": {"minutes": 5}}],
    )
    loaded = load_tasks(env, path, "flat")
    assert list(loaded) == ["ext-7"]
    write_rows(path, [{"id": "ext-8", "question": "q"}])
    with pytest.raises(InputFileError, match=r"flat.jsonl:1: not a flat task: missing field"):
        load_tasks(env, path, "flat")


def test_bfcl_files_as_shipped_are_scored_with_bfcl_rules(tmp_path):
    simple = BFCL / "BFCL_v4_simple_python.json"
    tasks = load_tasks(ENV, simple, "bfcl")  # answers come from possible_answer/ beside it
    rows = [{"task_id": tid, "response": ENV.gold_text(task)} for tid, task in tasks.items()]
    wrong = '<tool_call>{"name": "calculate_triangle_area", "arguments": {"base": 10}}</tool_call>'
    rows.append({"task_id": "simple_python_0", "response": wrong})
    result, out = run_verify(
        tmp_path, write_rows(tmp_path / "r.jsonl", rows), "--format", "bfcl", tasks_file=simple
    )
    assert result.exit_code == 0, result.output
    got = scores(out)
    assert len(got) == 31 and all(row["success"] for row in got[:30])
    assert got[30]["failure_kind"] == "bad_arguments" and got[30]["task_id"] == "simple_python_0"

    irrelevance = BFCL / "BFCL_v4_irrelevance.json"  # no possible_answer file: none is needed
    call = {"type": "function_call", "name": "determine_body_mass_index", "call_id": "c"}
    rows = [
        {"task_id": "irrelevance_0", "response": "No tool here computes that."},
        {"task_id": "irrelevance_0", "output": [{**call, "arguments": '{"weight": 70}'}]},
    ]
    result, out = run_verify(
        tmp_path, write_rows(tmp_path / "r.jsonl", rows), "--format", "bfcl", tasks_file=irrelevance
    )
    assert result.exit_code == 0, result.output
    assert [(r["success"], r["failure_kind"]) for r in scores(out)] == [
        (True, None),
        (False, "wrong_tool"),
    ]


def test_a_bad_bfcl_answer_file_exits_2_naming_it(tmp_path):
    (tmp_path / "possible_answer").mkdir()
    simple = tmp_path / "BFCL_v4_simple_python.json"
    simple.write_bytes((BFCL / simple.name).read_bytes())
    (tmp_path / "possible_answer" / simple.name).write_text('{"id": "simple_python_0"}\n')
    responses = write_rows(tmp_path / "r.jsonl", [{"task_id": "simple_python_0", "response": ""}])
    result, out = run_verify(tmp_path, responses, "--format", "bfcl", tasks_file=simple)
    assert result.exit_code == 2
    assert "possible_answer/BFCL_v4_simple_python.json:1:" in result.stderr
    assert "ground_truth" in result.stderr and not out.exists()


def test_gzipped_task_files_are_read_and_a_broken_one_is_a_corrupt_file(tmp_path):
    import gzip

    from gymflow.core.jsonl import read_jsonl

    good = tmp_path / "tasks.jsonl.gz"
    good.write_bytes(gzip.compress(b'{"a": 1}\n\n{"b": 2}\n'))
    assert list(read_jsonl(good)) == [(1, {"a": 1}), (3, {"b": 2})]
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"a": 1}\n')[:-6])
    with pytest.raises(InputFileError) as info:
        list(read_jsonl(broken))
    assert info.value.kind is FailureKind.CORRUPT_FILE and "broken.jsonl.gz" in str(info.value)


def test_errors_cross_process_boundaries_as_themselves():
    import pickle

    err = pickle.loads(pickle.dumps(GymflowError(FailureKind.TIMEOUT, "judge took 30 s")))
    assert err.kind is FailureKind.TIMEOUT and err.detail == "judge took 30 s"
    bad = pickle.loads(pickle.dumps(InputFileError("t.jsonl", 4, "oops", FailureKind.NOT_UTF8)))
    assert bad.kind is FailureKind.NOT_UTF8 and "t.jsonl:4" in str(bad)


MALFORMED = {  # the line of issue 31: a list as call_id once aborted the whole workplace file
    "task_id": "TASK",
    "output": [
        {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": ["c1"], "output": "{}"},
    ],
}


@pytest.mark.parametrize("name", list_envs())
def test_one_malformed_line_per_environment_and_every_line_is_scored(tmp_path, name):
    env = get_env(name)
    tasks_file = ROOT / "environments" / name / "examples" / "tasks.jsonl"
    first, second = list(load_tasks(env, tasks_file).values())[:2]
    rows = [
        {"task_id": first.task_id, "response": env.gold_text(first)},
        {**MALFORMED, "task_id": first.task_id},
        {"task_id": second.task_id, "response": env.gold_text(second)},
    ]
    responses = write_rows(tmp_path / "r.jsonl", rows)
    scored = verify_files(env, tasks_file, responses, tmp_path / "s.jsonl")
    assert len(scored) == 3
    bad = scored[1]
    assert (bad["failure_kind"], bad["reward"]) == (
        "invalid_trajectory",
        env.invalid_trajectory_score("").reward,
    )
    assert "line 2: output.1.function_call_output: 'call_id' must be a string" in bad["detail"]
    for good in (scored[0], scored[2]):  # scored (judge: no judge is set here, said by kind)
        assert good["reward"] is not None or good["failure_kind"] == "judge_not_configured", good


def test_a_verifier_bug_is_verifier_error_for_its_line_only(tmp_path, tasks):
    class Buggy(ToolCallEnvironment):
        def verify(self, task, items):
            if "boom" in str(items[-1]):
                raise TypeError("unhashable type: 'list'")
            return super().verify(task, items)

    rows = [
        {"task_id": tasks[0].task_id, "response": ENV.gold_text(tasks[0])},
        {"task_id": tasks[1].task_id, "response": "boom"},
        {"task_id": tasks[2].task_id, "response": ENV.gold_text(tasks[2])},
        {"task_id": "nope", "response": ""},
    ]
    responses = write_rows(tmp_path / "r.jsonl", rows)
    scored = verify_files(Buggy(), EXAMPLES, responses, tmp_path / "s.jsonl")
    assert [row["failure_kind"] for row in scored] == [
        None,
        "verifier_error",
        None,
        "unknown_task",
    ]
    assert (
        scored[1]["reward"] is None
        and "line 2: the tool_call verifier raised TypeError" in (scored[1]["detail"])
    )
    assert unscored(scored) == 1
    assert summary(scored) == (
        "4 responses scored: mean reward 1.000, 2 successes (2 without a reward); "
        "unknown_task 1, verifier_error 1"
    )
