"""A resources server scores against its own tasks: what a client sends as ground truth is refused.

The code server is the case that matters (its ground truth is test code it runs), served over
real HTTP on 127.0.0.1: a session is seeded by ``task_id`` (or by a whole task equal to the
server's copy, which is what ``EnvClient`` sends); a task with the client's own tests is one
JSON error and none of its code runs; ``--trust-client-tasks`` is the only way to score what
clients send; an in-process app (the lifecycle's, ``gymflow eval``'s) still takes its caller's
tasks. ``gymflow env serve code --tasks FILE`` does the same from the command line.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ports import free_port  # tests/ is on the path

from gymflow.core.failures import GymflowError
from gymflow.data.served_tasks import read_task_files, task_store
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer
from gymflow.env.resources_server import build_app
from gymflow.env.task_store import TaskStore
from gymflow.environments.code import CodeEnvironment

EXAMPLES = Path(__file__).resolve().parents[1] / "environments/code/examples/tasks.jsonl"
ENV = CodeEnvironment()
TASKS = read_task_files(ENV, [EXAMPLES])
GYMFLOW = str(Path(sys.executable).with_name("gymflow"))


def _gold(task) -> list[dict]:
    return [{"type": "message", "role": "assistant", "content": ENV.gold_text(task)}]


def _forged(task):
    """The same task id with the client's own tests, which any answer passes."""
    test = "def check(candidate):\n    assert candidate is not None\n"
    return task.model_copy(update={"ground_truth": {**task.ground_truth, "test": test}})


def _wrong(task) -> list[dict]:
    name = task.ground_truth["entry_point"]
    text = f"```python\ndef {name}(*args):\n    return None\n```"
    return [{"type": "message", "role": "assistant", "content": text}]


def test_a_code_server_scores_only_its_own_tasks():
    app = build_app(ENV, tasks=TaskStore(TASKS), verify_workers=1)
    with LoopbackServer(app) as server, httpx.Client(base_url=server.url) as http:
        health = http.get("/health").json()
        assert (health["tasks"], health["client_tasks"]) == (len(TASKS), False)
        task = TASKS[0]
        by_id = http.post("/seed_session", json={"task_id": task.task_id})
        assert by_id.status_code == 200 and by_id.json()["prompt"] == task.prompt
        sid = by_id.json()["session_id"]
        scored = http.post("/verify", json={"session_id": sid, "items": _gold(task)}).json()
        assert scored["reward"] == 1.0

        forged = http.post("/seed_session", json={"task": _forged(task).model_dump()})
        assert forged.status_code == 403
        assert forged.json()["error"]["kind"] == "unauthorized"
        assert "differs from this server's copy" in forged.json()["error"]["message"]

        foreign = task.model_copy(update={"task_id": "mine-1"})
        refused = http.post("/seed_session", json={"task": foreign.model_dump()})
        assert refused.status_code == 403 and "--trust-client-tasks" in refused.text
        unknown = http.post("/seed_session", json={"task_id": "nope"})
        assert unknown.status_code == 404 and "no task 'nope'" in unknown.text
        both = http.post("/seed_session", json={"task_id": task.task_id, "task": task.model_dump()})
        assert both.status_code == 422 and "exactly one" in both.text

        async def through_the_client() -> float:  # EnvClient sends the whole task: it matches
            async with EnvClient(base_url=server.url) as client:
                sid = await client.seed_session(TASKS[1])
                return (await client.verify(sid, _gold(TASKS[1]), close=True))["reward"]

        assert asyncio.run(through_the_client()) == 1.0


def test_trusting_servers_and_in_process_apps_take_the_clients_task():
    forged = _forged(TASKS[0])
    for app in (build_app(ENV, tasks=TaskStore(trust_client_tasks=True)), build_app(ENV)):

        async def seed_and_verify(app=app) -> dict:
            async with EnvClient(app=app) as client:
                sid = await client.seed_session(forged)
                return await client.verify(sid, _wrong(forged), close=True)

        assert asyncio.run(seed_and_verify())["reward"] == 1.0  # scored by the client's tests


def test_task_files_load_once_per_id_and_refuse_a_conflict(tmp_path):
    assert len(task_store(ENV, [EXAMPLES, EXAMPLES])) == len(TASKS)  # the same tasks twice
    other = tmp_path / "other.jsonl"
    changed = TASKS[0].model_copy(update={"ground_truth": {**TASKS[0].ground_truth, "x": 1}})
    other.write_text(changed.model_dump_json() + "\n")
    with pytest.raises(GymflowError, match="two different tasks have the id"):
        task_store(ENV, [EXAMPLES, other])
    with pytest.raises(GymflowError, match="no such task file"):
        task_store(ENV, [tmp_path / "missing.jsonl"])


def test_env_serve_code_with_tasks_refuses_a_clients_tests():
    port = free_port()
    proc = subprocess.Popen(
        [GYMFLOW, "env", "serve", "code", "--port", str(port), "--tasks", str(EXAMPLES)],
        stderr=subprocess.PIPE,
        env={**os.environ, "GYMFLOW_CODE_ISOLATION": "auto"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc)
        forged = httpx.post(f"{url}/seed_session", json={"task": _forged(TASKS[0]).model_dump()})
        assert forged.status_code == 403 and forged.json()["error"]["kind"] == "unauthorized"
        ok = httpx.post(f"{url}/seed_session", json={"task_id": TASKS[0].task_id})
        assert ok.status_code == 200
    finally:
        proc.terminate()
        proc.wait(15)
    assert b"5 tasks loaded" in proc.stderr.read()


def _wait(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("gymflow env serve code did not start")
