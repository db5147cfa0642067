"""The agent server: ``POST /run`` over real HTTP equals the in-process loop, and it keeps the
server conventions (health, token, JSON errors with kinds, limits).

Real parts: uvicorn on 127.0.0.1, the embedded micro model (random init, sampled at T=1 so its
200 episodes differ), the tool_call and counter environments' resources servers.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI

from gymflow.agent.runner import AgentService
from gymflow.agent.serve import AgentServeOptions, serve
from gymflow.agent.server import build_agent_app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer, serve_on_loopback
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.env.task_store import TaskStore
from gymflow.policy.spec import load_policy
from gymflow.rollout.driver import run_window
from gymflow.rollout.episode import Sampling
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.store import Lineage, plan, rollout_row

TIMING = ("started_at", "latency_s")


def _rows(env, planned, results) -> list[dict]:
    lineage = Lineage("agent-test", 0, 0, "spec", env.name, env.version, "hash")
    order = {p.rollout_id: i for i, p in enumerate(planned)}
    results = sorted(results, key=lambda r: order[r[0].rollout_id])
    rows = [rollout_row(lineage, p, ep, err) for p, ep, err in results]
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def _in_process(env, spec, tasks, planned, sampling, size):
    policy = load_policy(spec, tasks=tasks)
    done = []

    async def go():
        async with EnvClient(app=build_app(env)) as client:
            turns = ModelTurns(policy, sampling)
            await run_window(client, env, turns, planned, size, lambda *r: done.append(r))

    asyncio.run(go())
    return _rows(env, planned, done)


def _through_agent(url, env, spec, planned, sampling, concurrency):
    done = []
    runner = AgentService((url,), spec).runner(sampling, concurrency)
    asyncio.run(runner(planned, lambda *r: done.append(r)))
    return _rows(env, planned, done)


def test_run_over_http_equals_the_in_process_loop_on_200_tasks(micro_tool_call_model):
    env = get_env("tool_call")
    tasks = build_tasks(env, 600, seed=11, heldout_frac=0.0, val_frac=0.0)[:200]
    assert len(tasks) == 200
    spec = f"transformers:{micro_tool_call_model}"
    sampling = Sampling(max_new_tokens=24, temperature=1.0)
    planned = plan(tasks, "agent-test", 0, 1, seed=5)
    local = _in_process(env, spec, tasks, planned, sampling, 64)
    with LoopbackServer(build_agent_app()) as server:
        remote = _through_agent(server.url, env, spec, planned, sampling, 64)
    assert len(remote) == len(local) == 200
    # tokens, items, rewards, kinds, ids, seeds: equal; logprobs: equal up to float rounding
    # (a batch of another shape sums in another order, ~1e-7)
    bare = [({k: v for k, v in r.items() if k != "logprobs"}) for r in (*local, *remote)]
    differing = [a["task_id"] for a, b in zip(bare[:200], bare[200:], strict=True) if a != b]
    assert not differing, f"{len(differing)} rows differ, first {differing[:3]}"
    gap = max(
        abs(x - y)
        for a, b in zip(local, remote, strict=True)
        for x, y in zip(a["logprobs"], b["logprobs"], strict=True)
    )
    assert gap < 1e-4
    # the comparison is not vacuous: the rows hold sampled tokens that differ between tasks
    assert len({tuple(r["completion_ids"]) for r in local}) > 150
    assert all(len(r["completion_ids"]) == len(r["logprobs"]) > 0 for r in remote)


def test_multi_turn_episodes_with_tool_calls_equal_too():
    env = get_env("counter")
    # one task per prompt: the in-process gold replay answers a prompt with its first task's gold
    by_prompt = {t.prompt[-1]["content"]: t for t in build_tasks(env, 60, 2, 0.0, 0.0)}
    tasks = list(by_prompt.values())[:20]
    spec = "scripted:counter"
    sampling = Sampling(max_completion_tokens=1 << 16)
    planned = plan(tasks, "agent-test", 0, 2, seed=0)
    local = _in_process(env, spec, tasks, planned, sampling, 16)
    with LoopbackServer(build_agent_app()) as server:
        remote = _through_agent(server.url, env, spec, planned, sampling, 16)
    assert remote == local
    assert all(r["reward"] == 1.0 and r["tool_calls"] >= 1 for r in remote)


def test_conventions_health_token_errors_and_limits():
    env = get_env("counter")
    task = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    held = TaskStore([task])  # scores only the task it holds
    app = build_agent_app(token="s3cret", tasks=held, max_new_tokens_limit=64)
    auth = {"Authorization": "Bearer s3cret"}
    with serve_on_loopback(app) as url:
        health = httpx.get(f"{url}/health").json()  # open without the token
        assert health["ok"] and health["kind"] == "agent" and health["tasks"] == 1
        body = {
            "task_id": task.task_id,
            "policy": "scripted:counter",
            "max_completion_tokens": 4096,
        }
        refused = httpx.post(f"{url}/run", json=body)
        assert refused.status_code == 401
        assert refused.json()["error"]["kind"] == "unauthorized"
        ok = httpx.post(f"{url}/run", json=body, headers=auth).json()
        assert ok["reward"] == 1.0 and ok["error"] is None and ok["token_view"] is not None
        cases = [
            (b"{", 400, "invalid_json"),
            (b"\xff", 400, "not_utf8"),
            (b'{"task_id": "nope", "policy": "scripted:counter"}', 404, "bad_request"),
            (b'{"policy": "scripted:counter"}', 422, "bad_request"),
            (b'{"task_id": "x", "surprise": 1}', 422, "bad_request"),
            (
                b'{"task_id": "%s", "max_new_tokens": 65}' % task.task_id.encode(),
                422,
                "bad_request",
            ),
            (b'{"task_id": "%s"}' % task.task_id.encode(), 422, "bad_request"),  # no policy
            (
                b'{"task_id": "%s", "policy": "no/such/dir"}' % task.task_id.encode(),
                422,
                "bad_request",
            ),
        ]
        for raw, status, kind in cases:
            resp = httpx.post(f"{url}/run", content=raw, headers=auth)
            assert (resp.status_code, resp.json()["error"]["kind"]) == (status, kind), raw
        other = build_tasks(env, 9, seed=5, heldout_frac=0.0, val_frac=0.0)[0]
        forged = task.model_copy(update={"ground_truth": other.ground_truth})
        for sent in (other, forged):  # a task it does not hold, or its own with another truth
            resp = httpx.post(
                f"{url}/run",
                json={**body, "task_id": None, "task": sent.model_dump()},
                headers=auth,
            )
            assert (resp.status_code, resp.json()["error"]["kind"]) == (403, "unauthorized")
        same = {**body, "task_id": None, "task": task.model_dump()}  # equal to its copy: scored
        assert httpx.post(f"{url}/run", json=same, headers=auth).json()["reward"] == 1.0
        big = httpx.post(f"{url}/run", content=b" " * (5 << 20), headers=auth)
        assert big.status_code == 413 and big.json()["error"]["kind"] == "payload_too_large"
        missing = httpx.get(f"{url}/nowhere", headers=auth)
        assert missing.status_code == 404 and missing.json()["error"]["kind"] == "bad_request"


def _hanging_policy_app(delay_s: float) -> FastAPI:
    """An OpenAI-compatible server that answers after ``delay_s`` (a slow backend)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        await asyncio.sleep(delay_s)
        message = {"role": "assistant", "content": "late"}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}

    return app


def test_live_episode_cap_and_episode_timeout():
    env = get_env("counter")
    task = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    with serve_on_loopback(_hanging_policy_app(3.0)) as slow:
        app = build_agent_app(max_live=1, episode_timeout_s=1.0)
        with serve_on_loopback(app) as url:
            body = {"task": task.model_dump(), "policy": f"{slow}/v1", "model": "m"}

            async def two():
                async with httpx.AsyncClient(timeout=30) as http:
                    first = asyncio.ensure_future(http.post(f"{url}/run", json=body))
                    await asyncio.sleep(0.3)
                    second = await http.post(f"{url}/run", json=body)
                    return await first, second

            started = time.monotonic()
            first, second = asyncio.run(two())
            assert second.status_code == 503
            assert second.json()["error"]["kind"] == "session_limit"
            assert first.status_code == 200, first.text
            assert first.json()["error"]["kind"] == "timeout"
            assert first.json()["reward"] is None
            assert time.monotonic() - started < 2.9  # cut at its 1 s limit, not the 3 s backend


def test_an_environment_that_is_down_is_a_rollout_without_reward():
    env = get_env("counter")
    tasks = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[:2]
    with serve_on_loopback(FastAPI()) as gone:
        pass  # the port is closed again
    with LoopbackServer(build_agent_app()) as server:
        service = AgentService((server.url,), "scripted:counter", env=gone, retries=0)
        done = []
        runner = service.runner(Sampling(), 2)
        asyncio.run(runner(plan(tasks, "r", 0, 1, 0), lambda *r: done.append(r)))
    assert [err.kind for _, ep, err in done] == [FailureKind.ENV_UNAVAILABLE] * 2
    assert all(ep is None for _, ep, _ in done)


def test_a_refused_request_stops_the_run_and_a_dead_server_is_agent_unavailable():
    env = get_env("counter")
    tasks = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[:2]
    planned = plan(tasks, "r", 0, 1, 0)
    with LoopbackServer(build_agent_app()) as server:
        runner = AgentService((server.url,), "transformers:/no/such/model").runner(Sampling(), 2)
        with pytest.raises(GymflowError) as refused:
            asyncio.run(runner(planned, lambda *r: None))
    assert refused.value.kind is FailureKind.BAD_REQUEST
    done = []
    runner = AgentService((server.url,), "scripted:counter", retries=1).runner(Sampling(), 2)
    asyncio.run(runner(planned, lambda *r: done.append(r)))
    assert [err.kind for _, _, err in done] == [FailureKind.AGENT_UNAVAILABLE] * 2


def test_serve_refuses_a_public_bind_without_a_token():
    with pytest.raises(GymflowError) as exc:
        serve(AgentServeOptions(host="0.0.0.0", port=1))
    assert exc.value.kind is FailureKind.UNAUTHORIZED
