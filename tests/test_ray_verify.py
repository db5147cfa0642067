"""Heavy verifiers on Ray actors (``verify_on="ray"``): real local Ray clusters, real servers.

``gymflow env serve math --verify-on ray`` (the command starts and stops its cluster) scores as
the local process pool does, from Ray actor processes; in-process servers on a cluster this
module starts: ``math`` on Ray gives the local pool's verdicts on gold answers and every probe,
verified in Ray worker processes (their pids reported by the verifier); a stuck verifier is
``verify_timeout`` with its actor killed and the next call served; a SIGKILLed actor is
``env_unavailable`` and the next call served.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from ports import free_port_pair  # tests/ is on the path
from ray_verify_envs import HANG, PidMath  # tests/ is on the path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app

ray = pytest.importorskip("ray")
from gymflow.core.ray_cluster import ray_cluster  # noqa: E402

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
MATH = get_env("math")
TASKS = build_tasks(MATH, 4, 11, 0.0, 0.0)
TEXTS = [
    (t, text) for t in TASKS for text in [MATH.gold_text(t)] + [p.text for p in MATH.probes(t)]
]
"""Every task's gold answer and its probes (wrong, empty, stuffed answers)."""


def items(task, text: str) -> list[dict]:
    return prompt_items(task.prompt) + assistant_items(text, 0)


async def verdicts(url: str) -> list[tuple]:
    """(reward, success, failure kind) of every text in TEXTS, each in its own session."""
    async with EnvClient(base_url=url, timeout_s=120) as client:
        out = []
        for task, text in TEXTS:
            sid = await client.seed_session(task)
            score = await client.verify(sid, items(task, text), close=True)
            out.append((score["reward"], score["success"], score["failure_kind"]))
        return out


def local_verdicts() -> list[tuple]:
    app = build_app(MATH, verify_workers=1)
    with LoopbackServer(app) as server:
        return asyncio.run(verdicts(server.url))


@pytest.fixture(scope="module")
def expected() -> list[tuple]:
    found = local_verdicts()
    rewards = [r for r, _, _ in found]
    assert 1.0 in rewards and 0.0 in rewards, rewards  # gold and wrong answers both present
    return found


def _health(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_env_serve_verify_on_ray_scores_as_the_local_pool_from_ray_actors(expected, tmp_path):
    port = free_port_pair()
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
    tasks = tmp_path / "tasks.jsonl"  # the server scores its own tasks
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    server = subprocess.Popen(
        [GYMFLOW, "env", "serve", "math", "--port", str(port), "--workers", "2",
         "--verify-on", "ray", "--verify-workers", "1", "--tasks", str(tasks)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not all(_health(u) for u in urls):
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)
        for url in urls:  # each worker verifies on its own actor
            assert asyncio.run(verdicts(url)) == expected
        tree = psutil.Process(server.pid).children(recursive=True)
        actors = [p for p in tree if p.cmdline()[:1] == ["ray::VerifyActor"]]
        assert len(actors) == 2, [p.cmdline()[:1] for p in tree]  # one per server worker
        assert server.pid not in {p.pid for p in actors}
    finally:
        server.send_signal(signal.SIGTERM)
        status = server.wait(60)
    assert status == 0, server.stderr.read()
    time.sleep(1)
    assert not [p for p in actors if p.is_running()], "the local cluster outlived the command"


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for this module; its workers can import ``ray_verify_envs``."""
    here = str(Path(__file__).parent)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, before) if p)
    try:
        with ray_cluster(None, num_cpus=4, object_store_mb=100) as c:
            yield c
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def test_math_on_ray_actors_gives_the_local_pools_verdicts_in_ray_workers(cluster, expected):
    app = build_app(MATH, verify_on="ray", verify_workers=2)
    with LoopbackServer(app) as server:
        assert asyncio.run(verdicts(server.url)) == expected

    async def pids(url: str) -> set[int]:
        async with EnvClient(base_url=url, timeout_s=120) as client:
            scored = []
            for task, text in TEXTS[:6]:
                sid = await client.seed_session(task)
                scored.append(await client.verify(sid, items(task, text), close=True))
        return {int(s["components"]["pid"]) for s in scored}

    app = build_app(PidMath(), verify_on="ray", verify_workers=2)
    with LoopbackServer(app) as server:
        seen = asyncio.run(pids(server.url))
        actor_pids = set(app.state.verifier.pids)
        names = {psutil.Process(p).cmdline()[0] for p in seen}
    assert os.getpid() not in seen
    assert seen <= actor_pids, (seen, actor_pids)
    assert names == {"ray::VerifyActor"}, names


def _hang_then_recover(fault: str) -> tuple[GymflowError, dict, int, int, float]:
    """Verify once, then a call that hangs (and, for ``kill``, SIGKILL its actor), then once
    more: (the error, the last score, the first actor's pid, the last's, seconds to fail)."""
    task = TASKS[0]
    app = build_app(PidMath(), verify_on="ray", verify_workers=1, verify_timeout_s=4.0)

    async def main():
        async with EnvClient(base_url=server.url, timeout_s=120, retries=0) as client:
            sid = await client.seed_session(task)
            first = await client.verify(sid, items(task, MATH.gold_text(task)))
            (pid,) = app.state.verifier.pids
            started = time.monotonic()
            hanging = asyncio.ensure_future(client.verify(sid, items(task, HANG)))
            if fault == "kill":
                await asyncio.sleep(1.0)
                os.kill(pid, signal.SIGKILL)
            with pytest.raises(GymflowError) as info:
                await hanging
            failed_s = time.monotonic() - started
            last = await client.verify(sid, items(task, MATH.gold_text(task)), close=True)
            assert first["components"]["pid"] == pid
            return info.value, last, pid, failed_s

    with LoopbackServer(app) as server:
        error, last, pid, failed_s = asyncio.run(main())
    return error, last, pid, int(last["components"]["pid"]), failed_s


def test_a_stuck_verifier_is_verify_timeout_its_actor_killed_and_the_next_call_served(cluster):
    error, last, pid, new_pid, failed_s = _hang_then_recover("hang")
    assert error.kind is FailureKind.VERIFY_TIMEOUT, error
    assert 4.0 <= failed_s < 30, failed_s  # the 4 s timeout, not the verifier's 60 s
    assert last["reward"] == 1.0
    assert new_pid != pid  # a new actor
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the stuck actor's process still runs"
        time.sleep(0.1)


def test_a_killed_verify_actor_is_env_unavailable_and_the_next_call_served(cluster):
    error, last, pid, new_pid, failed_s = _hang_then_recover("kill")
    assert error.kind is FailureKind.ENV_UNAVAILABLE, error
    assert failed_s < 4.0, failed_s  # the death was seen, not the timeout
    assert last["reward"] == 1.0
    assert new_pid != pid


def test_verify_on_is_local_or_ray():
    with pytest.raises(GymflowError) as info:
        build_app(MATH, verify_on="gpu")
    assert info.value.kind is FailureKind.BAD_REQUEST
    done = subprocess.run(
        [GYMFLOW, "env", "serve", "math", "--ray", "2", "--verify-on", "ray"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().startswith(
        "error: [bad_request] --verify-on ray is for --workers"
    ), done.stderr
