"""NeMo Gym interop: import its counter tasks, play them, write its rollout format, re-score.

The reference for the rollout format is NeMo Gym's own ``example_rollouts.jsonl`` (workplace
assistant, vendored in ``tests/data/nemo_gym/`` with its provenance); our rows must have its
keys, item types and nesting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.jsonl import InputFileError
from gymflow.data.nemo_gym import parse_rollout_row, read_rollout_rows
from gymflow.data.task_files import load_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter import CounterEnvironment
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.nemo_gym_rows import rollout_row, write_rollouts_jsonl

REPO = Path(__file__).resolve().parents[1]
NEMO_GYM = REPO / "tests/data/nemo_gym"
NEMO_TASKS = REPO / "environments/counter/examples/nemo_gym_tasks.jsonl"
NEMO_ROLLOUTS = NEMO_GYM / "workplace_assistant_rollouts.example.jsonl"
ENV = CounterEnvironment()
runner = CliRunner()


def play(tasks, turns_of) -> list:
    """One episode per task through the in-process resources server, scripted by ``turns_of``."""
    server = build_app(ENV)

    async def go():
        async with EnvClient(app=server) as client:
            episodes = []
            for task in tasks:
                policy = ScriptedPolicy.replay(turns_of(task))
                episodes += await run_episodes(
                    client, ENV, policy, [task], Sampling(max_completion_tokens=1 << 20), [0]
                )
            return episodes

    return asyncio.run(go())


@pytest.fixture(scope="module")
def tasks():
    return list(load_tasks(ENV, NEMO_TASKS, "nemo_gym").values())


@pytest.fixture(scope="module")
def gold_rollouts(tmp_path_factory, tasks) -> Path:
    path = tmp_path_factory.mktemp("nemo") / "rollouts.jsonl"
    episodes = play(tasks, ENV.gold_turns)
    assert [ep.reward for ep in episodes] == [1.0] * 5
    assert write_rollouts_jsonl(path, episodes, ENV) == 5
    return path


def shape(value, path="") -> dict[str, str]:
    """Every (path -> kind) in a JSON value; list items are keyed by their ``type``."""
    kinds = {path: type(value).__name__}
    if isinstance(value, dict):
        for key, sub in value.items():
            kinds |= shape(sub, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            tag = item.get("type", "?") if isinstance(item, dict) else type(item).__name__
            kinds |= shape(item, f"{path}[{tag}]")
    return kinds


def rows_shape(path: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for where, kind in shape(json.loads(line)).items():
            found.setdefault(where, set()).add(kind)
    return found


def _under_null(where: str, found: dict[str, set[str]]) -> bool:
    """True when a parent of ``where`` is always null in ``found`` (so it has no children)."""
    cuts = [i for i, ch in enumerate(where) if ch in ".["]
    return any(found.get(where[:i]) == {"NoneType"} for i in cuts)


def test_the_project_copy_of_the_counter_tasks_is_nemo_gyms_file():
    digest = hashlib.sha256(NEMO_TASKS.read_bytes()).hexdigest()
    assert digest in (NEMO_GYM / "PROVENANCE.md").read_text(encoding="utf-8")


def test_counter_tasks_import_unchanged_with_stable_ids(tasks):
    rows = [json.loads(line) for line in NEMO_TASKS.read_text().splitlines()]
    assert len(tasks) == 5 and len({t.task_id for t in tasks}) == 5
    for task, row in zip(tasks, rows, strict=True):
        assert task.ground_truth == {k: row[k] for k in ("initial_count", "expected_count")}
        assert task.prompt == [
            {"role": "user", "content": row["responses_create_params"]["input"][0]["content"]}
        ]
        assert task.task_id == f"counter-{task.content_hash[:12]}"
    again = load_tasks(ENV, NEMO_TASKS, "nemo_gym")
    assert list(again) == [t.task_id for t in tasks]


def test_rollout_rows_have_nemo_gyms_structure(gold_rollouts):
    theirs, ours = rows_shape(NEMO_ROLLOUTS), rows_shape(gold_rollouts)
    # Every path NeMo Gym writes is there, as the same kind of value (null where we do not know
    # it: sampling settings, billing), except the free-form JSON schemas of tool parameters.
    for where, kinds in theirs.items():
        if ".parameters." in where:
            continue
        if _under_null(where, ours):
            continue
        assert where in ours, f"missing {where}"
        assert ours[where] <= kinds | {"NoneType"}, (where, ours[where], kinds)
    # Nothing new inside the create params or the Response; new top-level keys are verifier
    # fields (NeMo Gym echoes a task's fields) and gymflow's own.
    extra = {w.split(".")[1] for w in ours if w not in theirs and ".parameters." not in w}
    assert extra == {
        "initial_count",
        "expected_count",
        "task_id",
        "env",
        "success",
        "failure_kind",
        "reward_components",
    }
    head = ".response.output["
    items = {w[len(head) :].split("]")[0] for w in ours if w.startswith(head)}
    assert items == {"function_call", "function_call_output", "message"}


def test_a_gold_rollout_reads_back_as_the_episodes_items(tasks):
    (episode,) = play(tasks[:1], ENV.gold_turns)
    row = json.loads(json.dumps(rollout_row(episode, ENV)))
    assert row["reward"] == 1.0 and row["success"] is True and row["failure_kind"] is None
    assert row["response"]["output"][-1]["content"][0]["text"] == "6"
    back = parse_rollout_row(row)
    assert back.task_id == episode.task.task_id and back.reward == 1.0
    assert back.prompt == episode.task.prompt
    assert back.items == episode.items[1:]


def test_gold_rollouts_rescore_to_one_with_gymflow_verify(tmp_path, gold_rollouts):
    out = tmp_path / "scores.jsonl"
    args = ["verify", "--env", "counter", "--tasks", str(NEMO_TASKS), "--format", "nemo_gym"]
    result = runner.invoke(app, [*args, "--responses", str(gold_rollouts), "--out", str(out)])
    assert result.exit_code == 0, result.output
    scores = [json.loads(line) for line in out.read_text().splitlines()]
    assert [s["reward"] for s in scores] == [1.0] * 5 and all(s["success"] for s in scores)
    # NeMo Gym's own rows have no task_id: the task is found by its prompt.
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k != "task_id"}) + "\n"
            for line in gold_rollouts.read_text().splitlines()
        )
    )
    result = runner.invoke(app, [*args, "--responses", str(bare), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == [
        s["task_id"] for s in scores
    ]


def test_wrong_episodes_rescore_as_they_scored(tmp_path, tasks):
    """Off-by-one answers and malformed call markup keep their reward and failure kind."""

    def wrong(task):
        turns = ENV.gold_turns(task)
        if task is tasks[0]:
            return [*turns[:-1], str(task.ground_truth["expected_count"] + 1)]
        return ['<tool_call>{"name": "increment_counter"}}</tool_call>']

    episodes = play(tasks[:2], wrong)
    path = tmp_path / "r.jsonl"
    write_rollouts_jsonl(path, episodes, ENV)
    out = tmp_path / "s.jsonl"
    args = ["verify", "--env", "counter", "--tasks", str(NEMO_TASKS), "--format", "nemo_gym"]
    result = runner.invoke(app, [*args, "--responses", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    want = [(ep.reward, ep.score["failure_kind"]) for ep in episodes]
    assert [(s["reward"], s["failure_kind"]) for s in got] == want
    assert want == [(0.0, "bad_arguments"), (0.0, "invalid_json")]


def test_nemo_gyms_own_rollouts_read_back(tmp_path):
    rows = read_rollout_rows(NEMO_ROLLOUTS)
    assert [r.reward for r in rows] == [0.0, 1.0, 1.0, 1.0, 1.0]
    for row in rows:
        assert row.task_id is None and row.prompt[0]["role"] == "system"
        assert [it["type"] for it in row.items][-1] == "message"
        assert all(
            set(it) <= {"type", "call_id", "name", "arguments", "output", "role", "content"}
            for it in row.items
        )


BAD_ROLLOUTS = {
    "output_not_a_list": ({"output": {}}, "response.output: must be a list of Responses items"),
    "no_output": ({}, "missing field 'output'"),
    "call_without_arguments": (
        {"output": [{"type": "function_call", "name": "f", "call_id": "c"}]},
        "response.output.0.function_call: 'arguments' must be a string",
    ),
    "message_without_text": (
        {"output": [{"type": "message", "role": "assistant", "content": [{"type": "x"}]}]},
        "response.output.0.message: 'content' part 0 ('x') has no text",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROLLOUTS))
def test_a_bad_rollout_row_is_named_by_its_line(tmp_path, gold_rollouts, case):
    response, message = BAD_ROLLOUTS[case]
    lines = gold_rollouts.read_text().splitlines()
    bad = {**json.loads(lines[1]), "response": response}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(bad), lines[2]]) + "\n")
    with pytest.raises(
        InputFileError, match=re.escape(f"r.jsonl:2: not a NeMo Gym rollout: {message}")
    ):
        read_rollout_rows(path)
    out = tmp_path / "s.jsonl"  # gymflow verify scores it as the model's failure, and goes on
    args = ["verify", "--env", "counter", "--tasks", str(NEMO_TASKS), "--format", "nemo_gym"]
    result = runner.invoke(app, [*args, "--responses", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    first, scored, last = [json.loads(line) for line in out.read_text().splitlines()]
    assert first["success"] and last["success"]
    assert scored["failure_kind"] == "invalid_trajectory"
    assert f"line 2: not a NeMo Gym rollout: {message}" in scored["detail"]


def test_a_rollout_whose_prompt_is_not_its_tasks_is_refused(tmp_path, gold_rollouts):
    lines = gold_rollouts.read_text().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    path = tmp_path / "r.jsonl"
    swapped = {**first, "task_id": second["task_id"]}
    untracked = {k: v for k, v in first.items() if k != "task_id"}
    untracked["responses_create_params"]["input"][0]["content"] = "add 100 then get the count"
    for row, message in [
        (
            swapped,
            f"line 1: the rollout's input differs from the prompt of task '{second['task_id']}'",
        ),
        (untracked, "line 1: no task has this rollout's prompt"),
    ]:
        path.write_text(json.dumps(row) + "\n")
        out = tmp_path / "s.jsonl"
        args = ["verify", "--env", "counter", "--tasks", str(NEMO_TASKS), "--format", "nemo_gym"]
        result = runner.invoke(app, [*args, "--responses", str(path), "--out", str(out)])
        assert result.exit_code == 0, result.output
        (scored,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert scored["failure_kind"] == "invalid_trajectory" and message in scored["detail"]


def test_writing_is_atomic(tmp_path, tasks):
    (episode,) = play(tasks[:1], ENV.gold_turns)
    path = tmp_path / "r.jsonl"
    path.write_text("previous\n")

    unverified = dataclasses.replace(episode, score={})  # rollout_row fails on it: no reward
    with pytest.raises(KeyError):
        write_rollouts_jsonl(path, [episode, unverified], ENV)
    assert path.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]
