"""``gymflow env serve counter --ray 2``: two replicas as Ray actors on a local cluster the command
starts and stops. The same API and ``/health`` as ``--workers``; the client spreads sessions
over both; a replica SIGKILLed mid-collection is restarted by Ray and the collection ends with
every planned row on disk, its lost sessions unscored, which ``--retry-failed`` completes.

Real processes throughout, started as a user would.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import polars as pl
import psutil
import pytest
from ports import free_port_pair  # tests/ is on the path

from gymflow.data.task_files import load_tasks
from gymflow.env.client import EnvClient
from gymflow.env.registry import get_env
from gymflow.rollout.store import read_rollouts

pytest.importorskip("ray")

GYMFLOW = [str(Path(sys.executable).with_name("gymflow"))]  # the installed command
TASKS = Path(__file__).resolve().parents[1] / "environments/counter/examples/nemo_gym_tasks.jsonl"


def _health(url: str) -> dict | None:
    try:
        answer = httpx.get(f"{url}/health", timeout=1)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.status_code == 200 else None


def _wait_healthy(urls: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_health(u) for u in urls):
            return
        time.sleep(0.2)
    raise AssertionError(f"not all of {urls} answered /health")


def _listener(port: int) -> psutil.Process:
    for proc in psutil.process_iter():
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in proc.net_connections("inet")):  # fmt: skip
                return proc
        except psutil.Error:
            continue
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """One ``env serve --ray 2`` for the module (the kill test, last, leaves it restarted).

    Its output goes to a file: a pipe nobody reads fills up (Ray's logs of the killed replica
    and the failed calls) and blocks the server while it should restart the replica."""
    port = free_port_pair()
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
    log_path = tmp_path_factory.mktemp("replicas") / "env-serve.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [*GYMFLOW, "env", "serve", "counter", "--ray", "2", "--port", str(port),
         "--tasks", str(TASKS), "--format", "nemo_gym"],
        stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_healthy(urls)
        yield server, port, urls, log_path
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


_REPLICA = """
import asyncio, sys
from gymflow.env.ray_replicas import EnvReplica
from gymflow.env.task_store import TaskStore
port, wait = int(sys.argv[1]), float(sys.argv[2])
replica = EnvReplica("counter", "127.0.0.1", None, False, TaskStore())
asyncio.run(replica.serve(port, 0, [f"http://127.0.0.1:{port}"], bind_wait_s=wait))
"""


def _until_stderr(proc: subprocess.Popen, text: str, timeout_s: float) -> None:
    """Wait (no longer than ``timeout_s``) until ``proc`` writes ``text`` to its stderr."""
    seen = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            if text in line:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    assert seen.wait(timeout_s), f"{text!r} not on stderr within {timeout_s} s"


def test_a_restarted_replica_waits_for_its_port_and_a_first_start_does_not():
    """A replica's process (as Ray runs it, here without Ray) whose port is held: restarted, it
    tries again until the port is free; started for the first time, it says so and stops."""
    port = free_port_pair()
    url = f"http://127.0.0.1:{port}"
    holder = socket.socket()  # as an outgoing connection's local port would hold it
    holder.bind(("127.0.0.1", port))
    first = subprocess.run(
        [sys.executable, "-c", _REPLICA, str(port), "0"], capture_output=True, text=True, timeout=60
    )
    assert first.returncode != 0
    assert f"replica 0 could not serve on 127.0.0.1:{port} (port in use?)" in first.stderr
    restarted = subprocess.Popen(
        [sys.executable, "-c", _REPLICA, str(port), "60"], stderr=subprocess.PIPE, text=True
    )
    try:
        _until_stderr(restarted, "address already in use", timeout_s=30)  # it tried, goes on
        assert restarted.poll() is None and _health(url) is None  # still trying, not serving
        holder.close()
        _wait_healthy([url], timeout_s=30)
    finally:
        restarted.kill()
        restarted.wait(10)


def test_replicas_share_the_api_and_the_client_spreads_sessions(replicas):
    server, _, urls, _ = replicas
    for k, url in enumerate(urls):
        assert _health(url) == {
            "ok": True, "env": "counter", "version": "1", "sessions": 0, "worker": k,
            "workers": urls, "tasks": 5, "client_tasks": False,  # it holds the 5 tasks it was given
        }  # fmt: skip
    env = get_env("counter")
    tasks = list(load_tasks(env, TASKS, "nemo_gym").values())

    async def seed_four() -> tuple[list[str], list[int], dict]:
        async with EnvClient(base_url=urls[0]) as client:
            ids = [await client.seed_session(tasks[i % len(tasks)]) for i in range(4)]
            counts = [_health(u)["sessions"] for u in urls]
            observation = await client.call_tool(ids[1], "get_counter_value", {})
            return ids, counts, observation

    ids, counts, observation = asyncio.run(seed_four())
    assert counts == [2, 2]  # round-robin over the replicas /health lists
    assert [i.split("-")[0] for i in ids] == ["w0", "w1", "w0", "w1"]
    # a session's calls reach the replica that holds it: task 1's counter, as seeded there
    assert str(tasks[1].ground_truth["initial_count"]) in str(observation), observation


def test_a_replica_killed_mid_collection_is_restarted_and_retry_completes(replicas, tmp_path):
    server, port, urls, log_path = replicas
    out = tmp_path / "collect"
    args = [
        *GYMFLOW, "rollouts", "collect", "--env", "counter", "--tasks", str(TASKS),
        "--format", "nemo_gym", "--policy", "scripted:counter", "--out", str(out),
        "--num-repeats", "120", "--concurrency", "64", "--run-id", "kill-replica",
        "--env-url", urls[0], "--max-completion-tokens", "65536",
    ]  # fmt: skip
    planned = 5 * 120
    victim = _listener(port + 1)
    collect = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("rollouts/part-*.parquet")):
            time.sleep(0.005)
        victim.kill()  # SIGKILL replica 1, mid-collection
        stdout, stderr = collect.communicate(timeout=300)
    finally:
        if collect.poll() is None:
            collect.kill()
    assert collect.returncode == 0, stderr[-2000:]
    first = read_rollouts(out)
    assert first.height == planned and first["rollout_id"].n_unique() == planned
    unscored = first.filter(pl.col("reward").is_null())
    assert 0 < unscored.height < planned, stdout
    assert set(unscored["failure_kind"]) <= {"env_unavailable", "unknown_session"}

    try:
        _wait_healthy(urls, timeout_s=120)  # Ray restarted it on the same port
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; the server's log ends:\n{log_path.read_text()[-3000:]}"
        ) from None
    assert _listener(port + 1).pid != victim.pid
    retry = subprocess.run([*args, "--retry-failed"], capture_output=True, text=True, timeout=300)
    assert retry.returncode == 0, retry.stderr[-2000:]
    done = read_rollouts(out)
    assert done.height == planned and done["reward"].is_not_null().all()
    assert set(done.filter(pl.col("attempt") > 0)["rollout_id"]) == set(unscored["rollout_id"])
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    log = log_path.read_text()
    assert "replica 1 died; serving" in log, log[-2000:]
