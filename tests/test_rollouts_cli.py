"""``gymflow rollouts collect / export`` and the collect flow, run as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.data.task_set import build_tasks
from gymflow.environments.counter import CounterEnvironment
from gymflow.rollout.collection import CollectOptions
from gymflow.rollout.engine import ROLLOUTS_DIR, CollectSettings, plan_collection
from gymflow.rollout.store import read_parts

GYMFLOW = str(Path(sys.executable).parent / "gymflow")
COUNTER = CounterEnvironment()
runner = CliRunner()


@pytest.fixture(scope="module")
def task_file(tmp_path_factory) -> Path:
    tasks = build_tasks(COUNTER, 300, seed=11, heldout_frac=0.0, val_frac=0.0)
    # one task per prompt: the gold replay finds a task by its prompt, and counter prompts do
    # not say the start value
    tasks = list({t.prompt[0]["content"]: t for t in reversed(tasks)}.values())
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path


def collect_args(task_file: Path, out: Path, *extra: str) -> list[str]:
    return [
        "rollouts", "collect", "--env", "counter", "--tasks", str(task_file),
        "--policy", "scripted:counter", "--out", str(out), "--num-repeats", "2",
        "--max-completion-tokens", "65536", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("window", ["1", "4"])  # 4: killed with episodes live and rows buffered
def test_killed_collector_resumes_with_nothing_lost_or_duplicated(tmp_path, task_file, window):
    out = tmp_path / "out"
    parts = out / ROLLOUTS_DIR
    proc = subprocess.Popen(
        [GYMFLOW, *collect_args(task_file, out, "--concurrency", window, "--run-id", "kill-me")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.time() + 90
        while len(list(parts.glob("part-*.parquet"))) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "the collector wrote no part files"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # mid-collection, maybe mid-write
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    tasks = list(json.loads(line)["task_id"] for line in task_file.read_text().splitlines())
    planned = 2 * len(tasks)
    before = read_parts(parts)
    assert 0 < before.height < planned, "the kill must land mid-collection"
    # re-run without --run-id: the run on disk is resumed, in bigger chunks
    result = runner.invoke(app, collect_args(task_file, out, "--concurrency", "64"))
    assert result.exit_code == 0, result.output
    assert "run kill-me:" in result.output
    assert f"{planned - before.height} collected, {before.height} already on disk" in result.output
    after = read_parts(parts)
    from gymflow.data.task_files import load_tasks

    expected = {
        p.rollout_id
        for p in plan_collection(
            list(load_tasks(COUNTER, task_file).values()),
            CollectSettings(run_id="kill-me", num_repeats=2),
        )
    }
    ids = after["rollout_id"].to_list()
    assert len(ids) == len(set(ids)) == planned  # 0 duplicated
    assert set(ids) == expected  # 0 lost
    assert set(before["rollout_id"]) <= set(ids)
    assert after["reward"].to_list() == [1.0] * planned
    assert not list(parts.glob(".*.tmp"))


def test_dead_env_url_rows_say_env_unavailable(tmp_path, task_file):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    small = tmp_path / "two.jsonl"
    small.write_text("".join(task_file.read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "out"
    result = runner.invoke(
        app, collect_args(small, out, "--env-url", f"http://127.0.0.1:{port}", "--run-id", "dead")
    )
    assert result.exit_code == 0, result.output
    assert "4 without a reward" in result.output and "env_unavailable" in result.output
    df = read_parts(out / ROLLOUTS_DIR)
    assert df.height == 4 and df["reward"].null_count() == 4
    assert set(df["failure_kind"]) == {"env_unavailable"}


def test_corrupt_part_exits_with_a_message_naming_it(tmp_path, task_file):
    small = tmp_path / "two.jsonl"
    small.write_text("".join(task_file.read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "out"
    assert runner.invoke(app, collect_args(small, out, "--concurrency", "2")).exit_code == 0
    part = sorted((out / ROLLOUTS_DIR).glob("part-*.parquet"))[-1]
    part.write_bytes(b"PAR1 garbage")
    result = runner.invoke(app, collect_args(small, out))
    assert result.exit_code == 2
    assert "[corrupt_file]" in result.output and str(part) in result.output


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--num-repeats", "0"), ("--concurrency", "0"), ("--max-new-tokens", "0")],
)
def test_an_option_out_of_range_is_one_line_naming_it(tmp_path, task_file, flag, value):
    result = runner.invoke(app, collect_args(task_file, tmp_path / "out", flag, value))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert (
        line.startswith(f"error: [bad_request] {flag}: ") and "greater than or equal to 1" in line
    )
    assert not (tmp_path / "out").exists()


def test_the_options_refuse_unknown_fields():
    with pytest.raises(ValidationError, match="retry_faild"):
        CollectOptions(env="counter", tasks="t.jsonl", policy="p", out="o", retry_faild=True)


def test_bad_inputs_are_clear_errors(tmp_path, task_file):
    result = runner.invoke(app, collect_args(task_file, tmp_path, "--format", "nope"))
    assert result.exit_code == 2 and "unknown task format 'nope'" in result.output
    args = collect_args(task_file, tmp_path)
    args[args.index("scripted:counter")] = "scripted:nowhere"
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "unknown environment 'nowhere'" in result.output


def test_nemo_gym_task_format_and_exports_from_the_cli(tmp_path):
    tasks = Path(__file__).parent.parent / "environments/counter/examples/nemo_gym_tasks.jsonl"
    out = tmp_path / "out"
    args = collect_args(tasks, out, "--format", "nemo_gym")
    assert runner.invoke(app, args).exit_code == 0
    n = read_parts(out / ROLLOUTS_DIR).height
    assert n == 2 * len(tasks.read_text().splitlines())
    result = runner.invoke(
        app,
        ["rollouts", "export", "--in", str(out), "--format", "sft", "--out", str(tmp_path / "s")],
    )
    assert result.exit_code == 0 and f"{n // 2} rows (sft)" in result.output
    result = runner.invoke(
        app, ["rollouts", "export", "--in", str(out), "--format", "x", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2 and "unknown format" in result.output


def test_collect_flow_runs_the_same_collection(tmp_path, task_file, prefect_engine):
    """The flow on a real Prefect engine; a second run resumes (nothing left to collect)."""
    from gymflow.flows.collect import collect

    small = tmp_path / "two.jsonl"
    small.write_text("".join(task_file.read_text().splitlines(keepends=True)[:2]))
    options = CollectOptions(
        env="counter",
        tasks=small,
        policy="scripted:counter",
        out=tmp_path,
        num_repeats=3,
        max_completion_tokens=65536,
        run_id="flow",
    )
    report = collect(options)
    assert report["collected"] == 6 and report["failures"] == {}
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.filter(pl.col("reward") == 1.0).height == 6
    again = collect(options.model_dump(mode="json"))  # as a deployment passes it: plain JSON
    assert again["collected"] == 0 and again["already_on_disk"] == 6


def test_killed_before_its_first_part_the_rerun_starts_cleanly(tmp_path, task_file):
    """An empty rollouts/ folder (killed before any part was written) is no run to resume."""
    small = tmp_path / "two.jsonl"
    small.write_text("".join(task_file.read_text().splitlines(keepends=True)[:2]))
    (tmp_path / "out" / ROLLOUTS_DIR).mkdir(parents=True)
    result = runner.invoke(app, collect_args(small, tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "4 collected, 0 already on disk" in result.output
