"""A full disk during a collection: one line with the kind ``disk_full``, the parts already
written intact, and the same command completes the collection once space is back.

The disk is a real tmpfs of 100 KiB mounted for the test (root only; a non-root run skips with
the reason), grown with a remount afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.rollout.store import read_rollouts

TASKS = Path(__file__).resolve().parents[1] / "environments/counter/examples/nemo_gym_tasks.jsonl"


@pytest.fixture
def small_disk(tmp_path) -> Path:
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0 or not shutil.which("mount"):
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_disk_full_is_one_line_and_the_same_command_resumes(small_disk):
    out = small_disk / "collect"
    args = [
        "rollouts", "collect", "--env", "counter", "--tasks", str(TASKS), "--format",
        "nemo_gym", "--policy", "scripted:counter", "--out", str(out), "--num-repeats", "64",
        "--concurrency", "32", "--run-id", "full-disk",
    ]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 2, first.output
    assert "[disk_full] no space left on" in first.output
    assert "Traceback" not in first.output
    kept = read_rollouts(out)  # every part written before the disk filled is intact
    assert 0 < kept.height < 5 * 64

    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    done = read_rollouts(out)
    assert done.height == 5 * 64 and done["rollout_id"].n_unique() == done.height
    assert set(kept["rollout_id"]) <= set(done["rollout_id"])


def test_the_suite_refuses_to_start_on_a_nearly_full_disk(small_disk):
    """The suite itself: on a disk with less free space than it needs, one ``disk_full`` line
    before the first test, not dozens of tests failing halfway (a CI run once did)."""
    import os
    import sys

    here = Path(__file__).resolve()
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co", str(here)],
        capture_output=True,
        text=True,
        cwd=here.parents[1],
        env=os.environ | {"TMPDIR": str(small_disk)},
        timeout=120,
    )
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "[disk_full] 0.0 GiB free on" in ran.stdout + ran.stderr
    assert "the suite needs 3" in ran.stdout + ran.stderr
    assert "collected" not in ran.stdout  # stopped before collecting a test
