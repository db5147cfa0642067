"""An environment server process SIGKILLed in the middle of a collection: the collection ends
with every planned rollout on disk (scored, or unscored with ``env_unavailable``), and
``--retry-failed`` against a restarted server turns the unscored ones into scored rows.

Real processes throughout: ``gymflow env serve counter`` on 127.0.0.1 and ``gymflow rollouts
collect`` over HTTP, both started as the user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import polars as pl
from ports import free_port  # tests/ is on the path

from gymflow.rollout.store import read_rollouts

GYMFLOW = [str(Path(sys.executable).with_name("gymflow"))]  # the installed command
TASKS = Path(__file__).resolve().parents[1] / "environments/counter/examples/nemo_gym_tasks.jsonl"


def _serve(port: int, tasks: Path = TASKS, fmt: str = "nemo_gym") -> subprocess.Popen:
    """``gymflow env serve counter`` holding ``tasks`` (the server scores only its own)."""
    server = subprocess.Popen(
        [*GYMFLOW, "env", "serve", "counter", "--port", str(port), "--tasks", str(tasks),
         "--format", fmt],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise AssertionError("the env server did not start")


def test_a_server_killed_mid_batch_loses_nothing_and_retry_completes(tmp_path):
    port = free_port()
    out = tmp_path / "collect"
    args = [
        *GYMFLOW, "rollouts", "collect", "--env", "counter", "--tasks", str(TASKS),
        "--format", "nemo_gym", "--policy", "scripted:counter", "--out", str(out),
        "--num-repeats", "120", "--concurrency", "64", "--run-id", "kill-env",
        "--env-url", f"http://127.0.0.1:{port}", "--max-completion-tokens", "65536",
    ]  # fmt: skip
    planned = 5 * 120
    server = _serve(port)
    collect = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("rollouts/part-*.parquet")):
            time.sleep(0.005)
        server.kill()  # SIGKILL, mid-batch
        server.wait(10)
        stdout, stderr = collect.communicate(timeout=300)
    finally:
        for proc in (server, collect):
            if proc.poll() is None:
                proc.kill()
    assert collect.returncode == 0, stderr[-2000:]
    first = read_rollouts(out)
    assert first.height == planned and first["rollout_id"].n_unique() == planned
    unscored = first.filter(pl.col("reward").is_null())
    assert 0 < unscored.height < planned, stdout
    assert set(unscored["failure_kind"]) == {"env_unavailable"}

    server = _serve(port)
    try:
        retry = subprocess.run(
            [*args, "--retry-failed"], capture_output=True, text=True, timeout=300,
            env={**os.environ},
        )  # fmt: skip
    finally:
        server.kill()
        server.wait(10)
    assert retry.returncode == 0, retry.stderr[-2000:]
    done = read_rollouts(out)
    assert done.height == planned and done["reward"].is_not_null().all()
    retried = done.filter(pl.col("attempt") > 0)
    assert set(retried["rollout_id"]) == set(unscored["rollout_id"])
