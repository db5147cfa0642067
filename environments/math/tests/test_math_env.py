"""math: the environment contract through the real server, the data, the CLI, the examples."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.data.task_files import load_tasks
from gymflow.env.registry import get_env
from gymflow.environments.math import MathEnvironment
from gymflow.environments.math.generator import LEVELS, generate
from gymflow.environments.math.loaders import DATA, FILES, source_rows, source_tasks
from gymflow.environments.math.make_examples import example_tasks
from gymflow.eval.verify_files import load_responses, score_responses
from gymflow.rollout.env_check import check_environment
from gymflow.rollout.examples import task_row

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
ENV = MathEnvironment()


def test_registered_single_turn_without_tools_and_heavy_verify():
    env = get_env("math")
    assert isinstance(env, MathEnvironment)
    assert (env.max_turns, env.tools(), env.tool_schemas, env.heavy_verify) == (1, [], [], True)


def test_env_check_through_the_server_with_its_verify_pool():
    golds, probes, problems = check_environment(ENV, 20)
    assert problems == []
    assert golds == 20 and probes == 16 * golds


def test_generator_is_seeded_and_covers_every_level():
    first, again, other = generate(50, 1), generate(50, 1), generate(50, 2)
    assert first == again and first != other
    assert {p.level for p in first} == set(LEVELS)
    drafts = ENV.generate(5, 1)
    assert [d.ground_truth["level"] for d in drafts] == [1, 2, 3, 4, 5]
    assert all(
        d.prompt[0]["content"].endswith("Put the final answer in \\boxed{}.") for d in drafts
    )


def test_sources_keep_their_ids_and_are_heldout():
    gsm8k, math500 = source_tasks("gsm8k"), source_tasks("math500")
    assert [t.task_id for t in gsm8k] == [f"gsm8k_test_{i}" for i in range(1319)]
    assert [t.task_id for t in math500] == [f"math500_{i}" for i in range(500)]
    assert {t.split for t in gsm8k + math500} == {"heldout"}
    row = next(source_rows("math500"))
    assert math500[0].ground_truth["answer"] == row["answer"]
    assert row["problem"] in math500[0].prompt[0]["content"]


def test_data_files_are_the_ones_their_provenance_names():
    for name in FILES.values():
        digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        assert digest in (DATA / "PROVENANCE.md").read_text(encoding="utf-8")


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["gsm8k", "math500"])
def test_gymflow_verify_reads_the_source_files_as_they_are(tmp_path, fmt):
    tasks_file = DATA / FILES[fmt]
    tasks = source_tasks(fmt)[:12]
    rows = []
    for i, task in enumerate(tasks):
        gold = task.ground_truth["answer"]
        replies = (ENV.gold_text(task), f"\\boxed{{{gold}}}", "no idea", f"\\boxed{{{gold}}}+1")
        rows.append({"task_id": task.task_id, "response": replies[i % 4]})
    out = tmp_path / "scores.jsonl"
    args = ["verify", "--env", "math", "--format", fmt, "--tasks", str(tasks_file)]
    result = CliRunner().invoke(
        app, [*args, "--responses", str(_write(tmp_path / "r.jsonl", rows)), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    scores = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [s["task_id"] for s in scores] == [t.task_id for t in tasks]
    assert [s["reward"] for s in scores] == [1.0, 1.0, 0.0, 1.0] * 3
    assert [s["failure_kind"] for s in scores][2::4] == ["no_answer"] * 3


def test_a_bad_source_row_is_refused_naming_the_line(tmp_path):
    good = next(source_rows("gsm8k"))
    bad = _write(tmp_path / "t.jsonl", [good, {**good, "id": "x", "final_answer": ""}])
    result = CliRunner().invoke(
        app,
        ["verify", "--env", "math", "--format", "gsm8k", "--tasks", str(bad)]
        + ["--responses", str(bad), "--out", str(tmp_path / "s.jsonl")],
    )
    assert result.exit_code == 2 and "t.jsonl:2" in result.output


def test_examples_are_current_and_their_rollouts_score_as_recorded():
    recorded = [json.loads(line) for line in (EXAMPLES / "tasks.jsonl").open(encoding="utf-8")]
    assert recorded == [task_row(ENV, t) for t in example_tasks(ENV)]
    tasks = load_tasks(ENV, EXAMPLES / "tasks.jsonl")
    rows = load_responses(EXAMPLES / "rollouts.jsonl", tasks)
    rollouts = [json.loads(line) for line in (EXAMPLES / "rollouts.jsonl").open(encoding="utf-8")]
    scored = score_responses(ENV, tasks, rows)
    assert len(scored) == len(rollouts) == 8
    for score, rollout in zip(scored, rollouts, strict=True):
        assert (score["reward"], score["failure_kind"]) == (
            rollout["reward"],
            rollout["failure_kind"],
        )
    assert [s["reward"] for s in scored] == [1.0] * 5 + [0.0] * 3
