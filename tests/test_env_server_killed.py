"""An environment server process SIGKILLed in the middle of a collection: the collection ends
with every planned rollout on disk (scored, or unscored with ``env_unavailable``), and
``--retry-failed`` against a restarted server turns the unscored ones into scored rows.

Real processes throughout: ``gymflow env serve counter`` on 127.0.0.1 and ``gymflow rollouts
collect`` over HTTP, both started as the user would.
"""

from __future__ import annotations

import os
import subprocess
import time

import polars as pl
from env_processes import GYMFLOW, TASKS, serve_env
from ports import free_port  # tests/ is on the path

from gymflow.rollout.store import read_rollouts


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
    server = serve_env(port)
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

    server = serve_env(port)
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
