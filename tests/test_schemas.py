"""Parquet tables: validated on write and on read, damaged files refused with a reason."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.schemas import EVAL_ROWS, ROLLOUTS, TASKS, read_table, validate, write_table
from gymflow.data.task_set import build_tasks
from gymflow.environments.tool_call import ToolCallEnvironment


@pytest.fixture(scope="module")
def tasks_frame() -> pl.DataFrame:
    tasks = build_tasks(ToolCallEnvironment(), 40, 3, 0.1, 0.05)
    rows = [
        {
            **task.model_dump(),
            "prompt": json.dumps(task.prompt),
            "tools": json.dumps(task.tools),
            "ground_truth": json.dumps(task.ground_truth),
        }
        for task in tasks
    ]
    return pl.DataFrame(rows).select(list(TASKS.columns))


def rollouts_frame(n: int = 4) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rollout_id": [f"r{i}" for i in range(n)],
            "run_id": ["run"] * n,
            "iteration": [0] * n,
            "policy_version": [0] * n,
            "env": ["tool_call"] * n,
            "env_version": ["1"] * n,
            "task_id": ["t"] * n,
            "group_id": ["g"] * n,
            "sample_idx": list(range(n)),
            "dataset_hash": ["h"] * n,
            "trajectory": ["[]"] * n,
            "prompt_ids": [[1, 2]] * n,
            "completion_ids": [[3, 4, 5]] * n,
            "logprobs": [[-0.1, -0.2, -0.3]] * n,
            "env_mask": [[1, 1, 1]] * n,
            "reward": [1.0, -1.0, 0.6, 0.2][:n],
            "reward_components": ['{"format": 1.0}'] * n,
            "success": [True, False, False, False][:n],
            "failure_kind": [None, "invalid_json", "bad_arguments", "wrong_tool"][:n],
            "used_for_training": [True] * n,
            "turns": [1] * n,
            "tool_calls": [0] * n,
            "tokens": [5] * n,
            "latency_s": [0.01] * n,
            "seed": [0] * n,
            "started_at": [0.0] * n,
        },
        schema_overrides={"failure_kind": pl.String},
    )


def set_rows(df: pl.DataFrame, column: str, rows: list[int], value) -> pl.DataFrame:
    return df.with_columns(
        pl.when(pl.int_range(pl.len()).is_in(rows))
        .then(pl.lit(value, dtype=df.schema[column]))
        .otherwise(pl.col(column))
        .alias(column)
    )


def violation(df: pl.DataFrame, schema) -> GymflowError:
    with pytest.raises(GymflowError) as info:
        validate(df, schema, "frame.parquet")
    assert info.value.kind is FailureKind.SCHEMA_VIOLATION
    assert "frame.parquet" in str(info.value)
    return info.value


# --- round trips ------------------------------------------------------------------------------


def test_tasks_round_trip(tmp_path, tasks_frame):
    path = write_table(tasks_frame, TASKS, tmp_path / "sub" / "tasks.parquet")
    assert path == tmp_path / "sub" / "tasks.parquet"
    back = read_table(path, TASKS)
    assert back.equals(tasks_frame)
    assert json.loads(back["ground_truth"][0]) == json.loads(tasks_frame["ground_truth"][0])
    assert sorted(p.name for p in path.parent.iterdir()) == ["tasks.parquet"]  # no temp file left


def test_rewriting_replaces_the_file(tmp_path, tasks_frame):
    path = tmp_path / "tasks.parquet"
    write_table(tasks_frame, TASKS, path)
    write_table(tasks_frame.head(3), TASKS, path)
    assert read_table(path, TASKS).height == 3


def test_rollouts_and_eval_rows_round_trip(tmp_path):
    rollouts = rollouts_frame()
    assert read_table(write_table(rollouts, ROLLOUTS, tmp_path / "r.parquet"), ROLLOUTS).equals(
        rollouts
    )
    evals = pl.DataFrame(
        {
            "task_id": ["a", "a"],
            "policy": ["p", "p"],
            "sample_idx": [0, 1],
            "reward": [1.0, -1.0],
            "success": [True, False],
            "well_formed": [True, False],
            "unsafe": [False, False],
            "failure_kind": [None, "invalid_json"],
            "completion_tokens": [3, 4],
            "latency_s": [0.1, 0.2],
        }
    )
    assert read_table(write_table(evals, EVAL_ROWS, tmp_path / "e.parquet"), EVAL_ROWS).equals(
        evals
    )


# --- violations name the column and the rows --------------------------------------------------


def test_bad_values_name_columns_and_rows(tasks_frame):
    bad = set_rows(tasks_frame, "split", [2, 5], "test")
    bad = set_rows(bad, "prompt", [3], "{not json")
    message = str(violation(bad, TASKS))
    assert "column 'split' failed isin" in message
    assert "at rows [2, 5]" in message
    assert "column 'prompt' failed not valid JSON at rows [3]" in message


def test_invalid_json_in_each_json_column(tasks_frame):
    for column in ("prompt", "tools", "ground_truth"):
        message = str(violation(set_rows(tasks_frame, column, [1], '{"a": '), TASKS))
        assert f"column {column!r} failed not valid JSON at rows [1]" in message


def test_nan_reward_is_refused():
    bad = set_rows(rollouts_frame(), "reward", [2], float("nan"))
    message = str(violation(bad, ROLLOUTS))
    assert "column 'reward' failed reward is NaN at rows [2]" in message


def test_reward_out_of_range_and_unknown_failure_kind():
    bad = set_rows(rollouts_frame(), "reward", [0, 3], 1.5)
    bad = set_rows(bad, "failure_kind", [1], "cosmic_rays")
    message = str(violation(bad, ROLLOUTS))
    assert "column 'reward' failed in_range(-1.0, 1.0) at rows [0, 3]" in message
    assert "column 'failure_kind' failed isin" in message and "at rows [1]" in message


def test_mismatched_token_lists_are_refused():
    bad = rollouts_frame().with_columns(
        pl.when(pl.int_range(pl.len()) == 1)
        .then(pl.lit([-0.1], dtype=pl.List(pl.Float64)))
        .otherwise(pl.col("logprobs"))
        .alias("logprobs")
    )
    message = str(violation(bad, ROLLOUTS))
    assert "differ in length" in message and "[1]" in message


def test_duplicate_ids_are_refused(tasks_frame):
    bad = pl.concat([tasks_frame, tasks_frame.slice(4, 1)])
    message = str(violation(bad, TASKS))
    assert "column 'task_id'" in message and "column 'content_hash'" in message


def test_missing_and_extra_columns_are_named(tasks_frame):
    message = str(violation(tasks_frame.drop("env"), TASKS))
    assert "column 'env' is missing" in message
    message = str(violation(tasks_frame.with_columns(pl.lit(1).alias("bonus")), TASKS))
    assert "column 'bonus' is not in the schema" in message


def test_wrong_dtype_says_what_it_found(tasks_frame):
    message = str(violation(tasks_frame.with_columns(pl.col("seed").cast(pl.Float64)), TASKS))
    assert "column 'seed' failed dtype('Int64') (found Float64)" in message


def test_many_bad_rows_are_summarised(tasks_frame):
    bad = set_rows(tasks_frame, "split", list(range(12)), "nope")
    message = str(violation(bad, TASKS))
    assert "at rows [0, 1, 2, 3, 4, 5, 6, 7] (+4 more)" in message


# --- writing never leaves a bad or partial file -----------------------------------------------


def test_write_refuses_invalid_frame_and_leaves_nothing(tmp_path, tasks_frame):
    path = tmp_path / "out" / "tasks.parquet"
    with pytest.raises(GymflowError) as info:
        write_table(set_rows(tasks_frame, "split", [2, 5], "test"), TASKS, path)
    assert info.value.kind is FailureKind.SCHEMA_VIOLATION
    assert str(path) in str(info.value)
    assert not path.exists()
    assert not path.parent.exists() or list(path.parent.iterdir()) == []


def test_failed_write_keeps_the_previous_file(tmp_path, tasks_frame):
    path = tmp_path / "tasks.parquet"
    write_table(tasks_frame, TASKS, path)
    before = path.read_bytes()
    with pytest.raises(GymflowError):
        write_table(set_rows(tasks_frame, "seed", [0], None), TASKS, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.parquet"]


def test_write_failure_after_validation_leaves_no_temp_file(tmp_path, tasks_frame):
    path = tmp_path / "tasks.parquet"
    path.mkdir()  # a directory where the file should go: the final rename fails
    with pytest.raises(OSError):
        write_table(tasks_frame, TASKS, path)
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.parquet"]
    assert path.is_dir() and list(path.iterdir()) == []


# --- reading refuses damaged files ------------------------------------------------------------


def corrupt(path: Path) -> GymflowError:
    with pytest.raises(GymflowError) as info:
        read_table(path, TASKS)
    return info.value


def test_random_bytes_are_a_corrupt_file(tmp_path):
    path = tmp_path / "noise.parquet"
    path.write_bytes(random.Random(0).randbytes(4096))
    err = corrupt(path)
    assert err.kind is FailureKind.CORRUPT_FILE
    assert str(path) in str(err) and "not a readable Parquet file" in str(err)


def test_empty_file_is_a_corrupt_file(tmp_path):
    path = tmp_path / "empty.parquet"
    path.write_bytes(b"")
    assert corrupt(path).kind is FailureKind.CORRUPT_FILE


def test_truncated_files_are_refused(tmp_path, tasks_frame):
    good = write_table(tasks_frame, TASKS, tmp_path / "good.parquet").read_bytes()
    path = tmp_path / "cut.parquet"
    for keep in (len(good) - 1, len(good) - 8, len(good) // 2, 100, 4):
        path.write_bytes(good[:keep])
        assert corrupt(path).kind is FailureKind.CORRUPT_FILE, keep


def test_flipped_bytes_are_refused_or_caught_by_the_schema(tmp_path, tasks_frame):
    good = write_table(tasks_frame, TASKS, tmp_path / "good.parquet").read_bytes()
    rng = random.Random(1)
    path = tmp_path / "flipped.parquet"
    for _ in range(10):
        damaged = bytearray(good)
        for _ in range(16):
            damaged[rng.randrange(len(damaged))] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            back = read_table(path, TASKS)
        except GymflowError as err:  # never another exception type, never a crash
            assert err.kind in (FailureKind.CORRUPT_FILE, FailureKind.SCHEMA_VIOLATION)
        else:  # the damage hit bytes that do not matter (e.g. statistics)
            assert back.schema == tasks_frame.schema


def test_valid_parquet_with_the_wrong_schema_is_a_violation(tmp_path):
    path = tmp_path / "other.parquet"
    pl.DataFrame({"x": [1, 2]}).write_parquet(path)
    err = corrupt(path)
    assert err.kind is FailureKind.SCHEMA_VIOLATION
    assert "column 'task_id' is missing" in str(err)
    assert "column 'x' is not in the schema" in str(err)


def test_missing_file_is_not_disguised(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "absent.parquet", TASKS)
