"""Hostile and careless input against a resources server: every answer in the error shape,
the fault put where it belongs (the caller's data, the model's trajectory, the environment's
bug), nothing retried that would fail again, and the server free afterwards.

Real servers: in-process ASGI and uvicorn on 127.0.0.1; real environments (tool_call,
workplace) for the data-shape cases, small test environments for a verifier that crashes or
hangs.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.scoring import Score
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, TaskDraft
from gymflow.env.loopback import LoopbackServer
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.env.serve import serve

TOOL_CALL = get_env("tool_call")
WORKPLACE = get_env("workplace")


def _task(env: Environment, **changes):
    task = build_tasks(env, 4, 3, 0.0, 0.0)[0]
    return task.model_copy(update=changes)


def _post(client: httpx.Client, path: str, body: object) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def _error(resp: httpx.Response) -> dict:
    data = resp.json()
    assert set(data) == {"error"} and set(data["error"]) == {"kind", "message"}, data
    return data["error"]


@pytest.fixture(scope="module")
def tool_call_http():
    with LoopbackServer(build_app(TOOL_CALL)) as server, httpx.Client(base_url=server.url) as c:
        yield c


def test_the_server_issues_session_ids_and_refuses_client_chosen_ones(tool_call_http):
    task = _task(TOOL_CALL)
    resp = _post(tool_call_http, "/seed_session", {"task": task.model_dump()})
    sid = resp.json()["session_id"]
    assert len(sid) == 32 and int(sid, 16) >= 0  # 128 random bits, hex
    resp = _post(
        tool_call_http, "/seed_session", {"task": task.model_dump(), "session_id": "x" * 900_000}
    )
    assert resp.status_code in (413, 422)
    refused = _post(tool_call_http, "/seed_session", {"task": task.model_dump(), "session_id": "a"})
    assert refused.status_code == 422 and _error(refused)["kind"] == "bad_request"


def test_client_chosen_ids_when_allowed_are_short_and_plain():
    async def main():
        app = build_app(TOOL_CALL, client_session_ids=True)
        async with EnvClient(app=app) as client:
            assert await client.seed_session(_task(TOOL_CALL), "run-1:a_b.c") == "run-1:a_b.c"
            for bad in ("x" * 129, "has space", "", "é"):
                with pytest.raises(GymflowError) as info:
                    await client.seed_session(_task(TOOL_CALL), bad)
                assert info.value.kind is FailureKind.BAD_REQUEST
            live = await client.seed_session(_task(TOOL_CALL), "taken")
            with pytest.raises(GymflowError) as info:
                await client.seed_session(_task(TOOL_CALL), live)
            assert info.value.kind is FailureKind.SESSION_EXISTS
            assert await client.close_session("never-seeded") is False
            # closing an id nobody seeded does not block it
            assert await client.seed_session(_task(TOOL_CALL), "never-seeded") == "never-seeded"

    asyncio.run(main())


@pytest.mark.parametrize("path", ["/seed_session", "/verify", "/tools/set_timer", "/close_session"])
def test_a_5000_digit_integer_is_a_400_in_the_error_shape(tool_call_http, path):
    resp = _post(tool_call_http, path, b'{"session_id": ' + b"9" * 5000 + b"}")
    assert resp.status_code == 400 and _error(resp)["kind"] == "invalid_json"


def test_unknown_paths_and_methods_answer_in_the_error_shape(tool_call_http):
    assert _error(tool_call_http.get("/no/such/endpoint"))["kind"] == "bad_request"
    resp = tool_call_http.get("/verify")
    assert resp.status_code == 405 and _error(resp)["kind"] == "bad_request"


@pytest.mark.parametrize("env", [TOOL_CALL, WORKPLACE], ids=lambda e: e.name)
def test_a_task_the_verifier_cannot_read_is_refused_at_seed(tool_call_http, env):
    async def main():
        async with EnvClient(app=build_app(env)) as client:
            with pytest.raises(GymflowError) as info:
                await client.seed_session(_task(env, ground_truth={}))
            assert info.value.kind is FailureKind.BAD_REQUEST
            assert "cannot be used by" in info.value.detail

    asyncio.run(main())


MALFORMED = [
    [{"type": "function_call_output", "call_id": ["a"], "output": ""}],
    [{"type": "function_call", "name": "f", "arguments": {"not": "a string"}, "call_id": "c"}],
    [{"type": "message", "role": "assistant", "content": None}],
    [{"type": "reasoning_blob"}],
    ["not an item"],
    [{"role": "assistant", "content": "no type"}],
]


@pytest.mark.parametrize("env", [TOOL_CALL, WORKPLACE], ids=lambda e: e.name)
@pytest.mark.parametrize("items", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_trajectory_scores_as_invalid_not_as_a_fault(env, items):
    async def main():
        async with EnvClient(app=build_app(env)) as client:
            sid = await client.seed_session(_task(env))
            score = await client.verify(sid, items, close=True)
            assert score["failure_kind"] == "invalid_trajectory"
            assert score["success"] is False
            low, high = env.reward_range
            assert low <= score["reward"] <= high

    asyncio.run(main())


class CrashingVerifier(Environment):
    """A verifier with a bug: it raises on every well-formed trajectory."""

    name = "crashing"

    def tools(self):
        return []

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return [
            TaskDraft([{"role": "user", "content": f"say {i}"}], {"x": i}, seed) for i in range(n)
        ]

    def verify(self, task, items) -> Score:
        return {}["missing"]  # KeyError: a verifier bug

    def gold_text(self, task) -> str:
        return str(task.ground_truth["x"])


class HangingVerifier(CrashingVerifier):
    """A heavy verifier that never answers (it runs in the server's process pool)."""

    name = "hanging"
    heavy_verify = True

    def verify(self, task, items) -> Score:
        if task.ground_truth["x"] == 0:
            time.sleep(60)
        return Score(1.0, True)


def test_a_verifier_bug_is_a_500_with_its_kind_and_is_not_retried():
    env = CrashingVerifier()
    calls = {"verify": 0}

    async def main():
        app = build_app(env)

        async def counting(scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/verify":
                calls["verify"] += 1
            await app(scope, receive, send)

        with LoopbackServer(counting) as server:
            async with EnvClient(base_url=server.url, retries=3, backoff_s=0.01) as client:
                task = build_tasks(env, 1, 0, 0.0, 0.0)[0]
                sid = await client.seed_session(task)
                items = prompt_items(task.prompt) + assistant_items("0", 0)
                with pytest.raises(GymflowError) as info:
                    await client.verify(sid, items)
                assert info.value.kind is FailureKind.VERIFIER_ERROR
                assert "KeyError" in info.value.detail

    asyncio.run(main())
    assert calls["verify"] == 1


def test_a_hanging_verifier_times_out_and_the_server_stays_free():
    env = HangingVerifier()

    async def main():
        app = build_app(env, verify_timeout_s=2.0, verify_workers=1)
        with LoopbackServer(app) as server:
            async with EnvClient(base_url=server.url, timeout_s=30.0) as client:
                stuck, fine = build_tasks(env, 2, 0, 0.0, 0.0)
                assert stuck.ground_truth["x"] == 0
                sids = [await client.seed_session(t) for t in (stuck, fine)]
                items = [prompt_items(t.prompt) + assistant_items("0", 0) for t in (stuck, fine)]
                started = time.monotonic()
                with pytest.raises(GymflowError) as info:
                    await client.verify(sids[0], items[0])
                assert info.value.kind is FailureKind.VERIFY_TIMEOUT
                assert time.monotonic() - started < 20
                assert (await client.request("GET", "/health"))["ok"] is True
                score = await client.verify(sids[1], items[1], close=True)  # a fresh pool
                assert score["reward"] == 1.0
            app.state.verifier.shutdown(kill=True)

    asyncio.run(main())


def test_serving_beyond_loopback_without_a_token_is_refused():
    with pytest.raises(GymflowError) as info:
        serve("counter", "0.0.0.0", 1, token=None)
    assert info.value.kind is FailureKind.UNAUTHORIZED
    assert "--insecure" in info.value.detail
