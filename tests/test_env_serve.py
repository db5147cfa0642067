"""Serving environments: bearer token, verify-and-close, heavy verifiers in worker processes,
and ``gymflow env serve --workers N`` with session affinity (real processes on loopback)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ports import free_port_pair  # tests/ is on the path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.scoring import Score
from gymflow.core.trajectory import assistant_items
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.environments.tool_call import ToolCallEnvironment
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
TOOL_ENV = ToolCallEnvironment()
TASKS = build_tasks(TOOL_ENV, 8, 3, 0.0, 0.0)
COUNTER = CounterEnvironment()
COUNTER_TASKS = build_tasks(COUNTER, 24, 5, 0.0, 0.0)


def gold(task) -> list[dict]:
    return assistant_items(TOOL_ENV.gold_text(task), 0)


async def expect_error(coro, kind: FailureKind) -> GymflowError:
    with pytest.raises(GymflowError) as info:
        await coro
    assert info.value.kind is kind, info.value
    return info.value


# --- bearer token -------------------------------------------------------------------------------


def test_token_guards_every_endpoint_but_health():
    async def main():
        app = build_app(TOOL_ENV, token="s3cret")
        async with EnvClient(app=app, token="") as anonymous:
            assert (await anonymous.request("GET", "/health"))["ok"]
            await expect_error(anonymous.seed_session(TASKS[0]), FailureKind.UNAUTHORIZED)
            await expect_error(anonymous.tools(), FailureKind.UNAUTHORIZED)
            await expect_error(anonymous.close_session("x"), FailureKind.UNAUTHORIZED)
        async with EnvClient(app=app, token="wrong") as wrong:
            await expect_error(wrong.seed_session(TASKS[0]), FailureKind.UNAUTHORIZED)
        async with EnvClient(app=app, token="s3cret") as client:
            sid = await client.seed_session(TASKS[0])
            assert (await client.verify(sid, gold(TASKS[0])))["reward"] == 1.0
        assert app.state.sessions.live.keys() == {sid}  # the refused calls created nothing

    asyncio.run(main())


def test_token_comes_from_the_environment(monkeypatch):
    """A client made with no token sends GYMFLOW_ENV_TOKEN's; without it, it is refused."""
    monkeypatch.setenv("GYMFLOW_ENV_TOKEN", "from-env")

    async def main():
        app = build_app(TOOL_ENV, token="from-env")
        async with EnvClient(app=app) as client:
            sid = await client.seed_session(TASKS[0])
        assert app.state.sessions.live.keys() == {sid}
        monkeypatch.delenv("GYMFLOW_ENV_TOKEN")
        async with EnvClient(app=app) as anonymous:
            await expect_error(anonymous.seed_session(TASKS[0]), FailureKind.UNAUTHORIZED)

    asyncio.run(main())


# --- verify with close ----------------------------------------------------------------------------


def test_verify_can_close_the_session_in_the_same_call():
    async def main():
        app = build_app(TOOL_ENV)
        async with EnvClient(app=app) as client:
            sid = await client.seed_session(TASKS[1])
            assert (await client.verify(sid, gold(TASKS[1]), close=True))["reward"] == 1.0
            assert not app.state.sessions.live
            await expect_error(client.verify(sid, []), FailureKind.SESSION_CLOSED)
            assert await client.close_session(sid) is False  # idempotent

    asyncio.run(main())


# --- heavy verifiers run in worker processes ------------------------------------------------------


class SlowVerifier(ToolCallEnvironment):
    """tool_call with a verifier that burns CPU and says which process scored it."""

    heavy_verify = True

    def verify(self, task, items) -> Score:
        deadline = time.process_time() + 0.4
        while time.process_time() < deadline:
            pass
        score = super().verify(task, items)
        return Score(score.reward, score.success, score.failure_kind, {"pid": os.getpid()})


def test_heavy_verify_runs_in_another_process_and_leaves_the_loop_free():
    async def main():
        env = SlowVerifier()
        app = build_app(env, verify_workers=2)
        try:
            async with EnvClient(app=app) as client:
                sids = [await client.seed_session(t) for t in TASKS[:2]]
                await client.verify(sids[0], gold(TASKS[0]))  # starts the pool (spawn)
                started = time.perf_counter()
                verifying = asyncio.gather(
                    *(client.verify(s, gold(t)) for s, t in zip(sids, TASKS[:2], strict=True))
                )
                await asyncio.sleep(0.05)
                health_started = time.perf_counter()
                assert (await client.request("GET", "/health"))["sessions"] == 2
                health_s = time.perf_counter() - health_started
                scores = await verifying
                verify_s = time.perf_counter() - started
        finally:
            app.state.verifier.shutdown()
        assert [s["reward"] for s in scores] == [1.0, 1.0]
        pids = {s["components"]["pid"] for s in scores}
        assert os.getpid() not in pids
        # the loop answered while verifiers were busy (inline, /health would wait ~0.8 s)
        assert health_s < verify_s / 2, (health_s, verify_s)

    asyncio.run(main())


def test_a_dead_verifier_worker_is_env_unavailable_then_recovers():
    async def main():
        env = SlowVerifier()
        app = build_app(env, verify_workers=1)
        try:
            async with EnvClient(app=app, retries=0) as client:
                sid = await client.seed_session(TASKS[2])
                await client.verify(sid, gold(TASKS[2]))
                pool = app.state.verifier._pool
                (pid,) = [p.pid for p in pool._processes.values()]
                verifying = asyncio.ensure_future(client.verify(sid, gold(TASKS[2])))
                await asyncio.sleep(0.1)
                os.kill(pid, 9)
                await expect_error(verifying, FailureKind.ENV_UNAVAILABLE)
                assert (await client.verify(sid, gold(TASKS[2])))["reward"] == 1.0  # new pool
        finally:
            app.state.verifier.shutdown()

    asyncio.run(main())


# --- gymflow env serve --workers N ------------------------------------------------------------------


def _wait_ready(urls: list[str], proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    for url in urls:
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "workers did not start"
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    port = free_port_pair()
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
    tasks = tmp_path_factory.mktemp("served") / "tasks.jsonl"  # the server scores its own tasks
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in COUNTER_TASKS))
    proc = subprocess.Popen(
        [GYMFLOW, "env", "serve", "counter", "--port", str(port), "--workers", "2",
         "--tasks", str(tasks)],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_ready(urls, proc)
        yield urls, proc
    finally:
        proc.terminate()
        proc.wait(15)


def test_workers_list_each_other(two_workers):
    urls, _ = two_workers
    for k, url in enumerate(urls):
        health = httpx.get(f"{url}/health").json()
        assert health["worker"] == k and health["workers"] == urls


def test_sessions_spread_over_workers_and_stick_to_theirs(two_workers):
    urls, _ = two_workers

    async def main():
        sampling = Sampling(max_completion_tokens=1 << 20)
        async with EnvClient(base_url=urls[0]) as client:

            async def one(task):
                policy = ScriptedPolicy.replay(COUNTER.gold_turns(task))
                (ep,) = await run_episodes(client, COUNTER, policy, [task], sampling, [0])
                return ep

            episodes = await asyncio.gather(*(one(t) for t in COUNTER_TASKS))
            assert [e.reward for e in episodes] == [1.0] * len(COUNTER_TASKS)
            owners = {e.session_id.split("-")[0] for e in episodes}
            assert owners == {"w0", "w1"}  # both workers held sessions
            held = [await client.seed_session(t) for t in COUNTER_TASKS[:4]]
            counts = [httpx.get(f"{u}/health").json()["sessions"] for u in urls]
            assert counts == [2, 2]
            for sid in held:
                assert await client.close_session(sid) is True

    asyncio.run(main())


def test_a_call_on_the_wrong_worker_names_the_right_one(two_workers):
    urls, _ = two_workers

    async def main():
        async with EnvClient(base_url=urls[1], discover_workers=False) as direct:
            sid = await direct.seed_session(COUNTER_TASKS[0])
        assert sid.startswith("w1-")
        resp = httpx.post(
            f"{urls[0]}/tools/get_counter_value", json={"session_id": sid, "arguments": {}}
        )
        assert resp.status_code == 421
        assert resp.json()["error"]["kind"] == "wrong_worker"
        assert urls[1] in resp.json()["error"]["message"]
        async with EnvClient(base_url=urls[0]) as routed:  # a fresh client routes by the id
            out = await routed.call_tool(sid, "get_counter_value", {})
            assert out["error"] is None
            assert await routed.close_session(sid) is True

    asyncio.run(main())


def test_a_worker_that_dies_stops_the_server():
    port = free_port_pair()
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
    proc = subprocess.Popen(
        [GYMFLOW, "env", "serve", "counter", "--port", str(port), "--workers", "2"],
        stderr=subprocess.PIPE,
    )
    try:
        _wait_ready(urls, proc)
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        helpers = (b"resource_tracker", b"gymflow.core.watchdog")  # not workers
        workers = [
            int(pid)
            for pid in children
            if not any(h in Path(f"/proc/{pid}/cmdline").read_bytes() for h in helpers)
        ]
        assert len(workers) == 2
        os.kill(workers[0], 9)
        assert proc.wait(15) == 1
        assert b"exited" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_binding_beyond_loopback_without_a_token_warns():
    port = free_port_pair()
    proc = subprocess.Popen(
        [GYMFLOW, "env", "serve", "counter", "--host", "0.0.0.0", "--port", str(port)],
        stderr=subprocess.PIPE,
    )
    try:
        no_tasks, bind = proc.stderr.readline().decode(), proc.stderr.readline().decode()
        assert no_tasks.startswith("warning: no --tasks: this server holds no tasks")
        assert "without a bearer token" in bind
    finally:
        proc.terminate()
        proc.wait(15)


# --- async tools ------------------------------------------------------------------------------------


async def fetch_page(session: dict, url: str) -> dict:
    """Fetch a page (an I/O-bound tool: it waits without blocking other sessions).

    Args:
        url: Address of the page.
    """
    await asyncio.sleep(0.01)
    if not url.startswith("http"):
        raise ValueError("not a URL")
    session["fetched"].append(url)
    return {"url": url, "fetched": len(session["fetched"])}


class AsyncToolEnv(ToolCallEnvironment):
    name = "async_tools"

    def tools(self):
        return [fetch_page]

    def new_state(self, task) -> dict:
        return {"fetched": []}


def test_async_tools_are_awaited_and_their_errors_are_observations():
    env = AsyncToolEnv()
    task = TASKS[0].model_copy(update={"env": "async_tools"})

    async def main():
        async with EnvClient(app=build_app(env)) as client:
            sids = [await client.seed_session(task) for _ in range(3)]
            outs = await asyncio.gather(
                *(
                    client.call_tool(s, "fetch_page", {"url": f"http://x/{i}"})
                    for i, s in enumerate(sids)
                )
            )
            assert [o["output"] for o in outs] == [
                {"url": f"http://x/{i}", "fetched": 1} for i in range(3)
            ]
            bad = await client.call_tool(sids[0], "fetch_page", {"url": "nope"})
            assert bad["error"]["kind"] == "tool_error" and "not a URL" in bad["error"]["message"]

    asyncio.run(main())
