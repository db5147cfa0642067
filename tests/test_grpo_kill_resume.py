"""GRPO killed (SIGKILL) mid-run and resumed: the same final step count, every step's rollouts
stored once, no duplicate rollout ids, nothing half-written left behind.

The run is a real process (``tests/grpo_kill_child.py``: TRL's trainer, our rollout_func, the
counter server in-process, Parquet parts under ``OUT/rollouts``), killed once a checkpoint
exists and later steps' rollouts are on disk, then started again on the same folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from gymflow.rollout.store import read_rollouts

CHILD = Path(__file__).with_name("grpo_kill_child.py")


def _iterations_on_disk(out: Path) -> set[int]:
    return {int(p.stem.split("-")[1]) for p in (out / "rollouts").glob("part-*.parquet")}


def test_killed_grpo_resumes_to_the_same_steps_without_duplicates(counter_model, tmp_path):
    out = tmp_path / "grpo"
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(counter_model), str(out), "1.0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    try:
        # kill once checkpoint-2 exists and step 3's rollouts (after that checkpoint) are stored
        while time.monotonic() < deadline and child.poll() is None:
            if (out / "trainer" / "checkpoint-2").is_dir() and 3 in _iterations_on_disk(out):
                break
            time.sleep(0.05)
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    before = _iterations_on_disk(out)
    assert {0, 1, 2, 3} <= before and 5 not in before  # killed mid-run, past a checkpoint

    done = subprocess.run(
        [sys.executable, str(CHILD), str(counter_model), str(out), "0"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == 6
    assert result["resumed_from"] and Path(result["resumed_from"]).name.startswith("checkpoint-")

    rows = read_rollouts(out)  # validates every part: (rollout id, attempt) unique across them
    assert rows["rollout_id"].n_unique() == rows.height
    assert sorted(set(rows["iteration"])) == list(range(6))
    per_step = rows.filter(pl.col("used_for_training")).group_by("iteration").len()
    assert set(per_step["len"]) == {2 * 4}  # B x G, each step once
    parts = sorted((out / "rollouts").glob("part-*.parquet"))
    assert len(parts) == 6  # one part per step: the steps redone replaced theirs
    assert not list((out / "rollouts").glob(".*.tmp"))


def test_a_run_killed_after_its_last_checkpoint_trains_no_further(counter_model, tmp_path):
    """Killed between the last step's checkpoint and the end: the resume returns that
    checkpoint's policy with the same step count and training wall time, and runs no step."""
    out = tmp_path / "grpo"
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    run = [sys.executable, str(CHILD), str(counter_model), str(out), "0"]
    first = json.loads(subprocess.run(run, capture_output=True, env=env, check=True).stdout)
    assert first["steps"] == 6 and (out / "trainer" / "checkpoint-6").is_dir()
    parts = sorted((out / "rollouts").glob("part-*.parquet"))
    again = json.loads(subprocess.run(run, capture_output=True, env=env, check=True).stdout)
    assert again["steps"] == 6
    assert again["resumed_from"].endswith("checkpoint-6")
    assert sorted((out / "rollouts").glob("part-*.parquet")) == parts  # no seventh step
    assert again["wall_s"] >= first["wall_s"] * 0.9  # the earlier attempt's time is counted
