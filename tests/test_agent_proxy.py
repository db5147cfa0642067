"""The capturing proxy: token ids and logprobs as the backend returned them, multi-call episodes
as one trajectory, rows in the one store, and its conventions.

Real parts: uvicorn on 127.0.0.1 for the policy server (``gymflow policy serve``'s app), the
proxy and a tap between them; the embedded micro model; the openai SDK as the agent's client.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from openai import OpenAI

from gymflow.agent.backend import Backend
from gymflow.agent.proxy import EPISODE_HEADER, build_proxy_app
from gymflow.agent.proxy_store import ProxyStore
from gymflow.data.task_set import build_tasks
from gymflow.env.loopback import LoopbackServer, serve_on_loopback
from gymflow.env.registry import get_env
from gymflow.policy.openai_server import build_openai_app
from gymflow.policy.spec import load_policy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import read_rollouts


def _tap(backend_url: str, seen: list[dict]) -> FastAPI:
    """Forwards to the backend and keeps every chat completion it returned, untouched."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        async with httpx.AsyncClient(timeout=60) as http:
            resp = await http.post(
                f"{backend_url}/v1/chat/completions",
                content=await request.body(),
                headers={"content-type": "application/json"},
            )
        seen.append(resp.json())
        return Response(resp.content, resp.status_code, media_type="application/json")

    return app


def _open(proxy: str, task, **extra) -> dict:
    resp = httpx.post(f"{proxy}/episodes", json={"task": task.model_dump(), **extra})
    assert resp.status_code == 200, resp.text
    return resp.json()


def _end(proxy: str, eid: str) -> dict:
    return httpx.post(f"{proxy}/episodes/{eid}/end", json={}).json()


@pytest.fixture(scope="module")
def micro(micro_tool_call_model):
    return TransformersPolicy.from_path(micro_tool_call_model)


def test_captured_ids_and_logprobs_are_the_backends(micro, tmp_path):
    env = get_env("tool_call")
    tasks = build_tasks(env, 40, seed=7, heldout_frac=0.0, val_frac=0.0)[:3]
    seen: list[dict] = []
    with (
        LoopbackServer(build_openai_app(micro, "policy")) as backend,
        LoopbackServer(_tap(backend.url, seen)) as tap,
    ):
        store = ProxyStore(tmp_path, "proxy-run", "micro")
        with LoopbackServer(build_proxy_app(Backend(f"{tap.url}/v1"), store=store)) as proxy:
            for task in tasks:
                episode = _open(proxy.url, task)
                agent = OpenAI(base_url=episode["base_url"], api_key="none")
                reply = agent.chat.completions.create(
                    model="policy", messages=task.prompt, tools=task.tools, max_tokens=16
                )
                assert reply.choices[0].logprobs is None  # not asked for: not shown
                assert _end(proxy.url, episode["episode_id"])["error"] is None
    rows = read_rollouts(tmp_path).sort("started_at")
    assert rows.height == len(seen) == 3
    for row, raw, task in zip(rows.iter_rows(named=True), seen, tasks, strict=True):
        choice = raw["choices"][0]
        assert row["prompt_ids"] == raw["prompt_token_ids"]
        assert row["completion_ids"] == choice["token_ids"]
        assert row["logprobs"] == [t["logprob"] for t in choice["logprobs"]["content"]]
        assert row["env_mask"] == [1] * len(choice["token_ids"])
        # the agent's prompt is the in-process prompt: what GRPO trains on matches
        assert row["prompt_ids"] == micro.encode_prompt(task.prompt, task.tools)


def _tool_loop_agent(base_url: str, tool_url: str, task) -> None:
    """Plain openai-SDK code: call the model, run its tool calls at ``tool_url``, repeat."""
    client = OpenAI(base_url=base_url, api_key="none")
    messages = list(task.prompt)
    for _ in range(6):
        reply = client.chat.completions.create(
            model="policy", messages=messages, tools=task.tools, max_tokens=4096
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            result = httpx.post(f"{tool_url}/{call.function.name}", json=args).json()
            output = result["output"] if result["error"] is None else {"error": result["error"]}
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(output)}
            )


def test_a_multi_call_episode_is_one_trajectory_equal_to_the_in_process_one(tmp_path):
    env = get_env("counter")
    by_prompt = {t.prompt[-1]["content"]: t for t in build_tasks(env, 30, 4, 0.0, 0.0)}
    tasks = list(by_prompt.values())[:4]
    policy = load_policy("scripted:counter", tasks=tasks)  # gold answers, tokens = UTF-8 bytes
    store = ProxyStore(tmp_path, "proxy-run", "scripted")
    with LoopbackServer(build_openai_app(policy, "policy", max_tokens_limit=4096)) as backend:
        proxy = LoopbackServer(build_proxy_app(Backend(f"{backend.url}/v1"), store=store))
        with proxy:
            for task in tasks:
                episode = _open(proxy.url, task, seed=3)
                _tool_loop_agent(episode["base_url"], episode["tools_url"], task)
                _end(proxy.url, episode["episode_id"])
    rows = {r["task_id"]: r for r in read_rollouts(tmp_path).iter_rows(named=True)}
    from gymflow.env.client import EnvClient
    from gymflow.env.resources_server import build_app

    async def in_process():
        async with EnvClient(app=build_app(env)) as client:
            sampling = Sampling(max_completion_tokens=1 << 16)
            return await run_episodes(client, env, policy, tasks, sampling, [3] * len(tasks))

    for ep in asyncio.run(in_process()):
        row = rows[ep.task.task_id]
        assert row["turns"] == ep.turns >= 3 and row["tool_calls"] == ep.tool_calls >= 2
        assert row["reward"] == ep.reward == 1.0
        assert row["prompt_ids"] == ep.prompt_ids
        assert row["completion_ids"] == ep.completion_ids  # model turns + tool results, in order
        assert row["env_mask"] == ep.env_mask and 0 in row["env_mask"]
        items = json.loads(row["trajectory"])
        assert [i["type"] for i in items] == [i["type"] for i in ep.items]


def test_conventions_episode_marking_errors_and_limits(tmp_path):
    env = get_env("counter")
    task = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    policy = load_policy("scripted:counter", tasks=[task])
    store = ProxyStore(tmp_path, "proxy-run", "scripted")
    with LoopbackServer(build_openai_app(policy, "policy", max_tokens_limit=4096)) as backend:
        app = build_proxy_app(Backend(f"{backend.url}/v1"), store=store, token="tok", max_calls=1)
        auth = {"Authorization": "Bearer tok"}
        with serve_on_loopback(app) as proxy:
            assert httpx.get(f"{proxy}/health").json()["kind"] == "proxy"
            body = {"task": task.model_dump()}
            assert httpx.post(f"{proxy}/episodes", json=body).status_code == 401
            eid = httpx.post(f"{proxy}/episodes", json=body, headers=auth).json()["episode_id"]
            chat = {"model": "m", "messages": task.prompt, "max_tokens": 4096}
            marked = httpx.post(
                f"{proxy}/v1/chat/completions", json=chat, headers={**auth, EPISODE_HEADER: eid}
            )
            assert marked.status_code == 200, marked.text  # the header marks the episode
            over = httpx.post(
                f"{proxy}/episodes/{eid}/v1/chat/completions", json=chat, headers=auth
            )
            assert (over.status_code, over.json()["error"]["kind"]) == (429, "session_limit")
            cases = [
                ("/v1/chat/completions", chat, {}, 400, "bad_request"),  # no episode named
                ("/episodes/nope/v1/chat/completions", chat, {}, 404, "unknown_session"),
                (
                    f"/episodes/{eid}/v1/chat/completions",
                    {**chat, "stream": True},
                    {},
                    400,
                    "bad_request",
                ),
                (f"/episodes/{eid}/v1/chat/completions", {"messages": 3}, {}, 422, "bad_request"),
            ]
            for path, payload, headers, status, kind in cases:
                resp = httpx.post(f"{proxy}{path}", json=payload, headers={**auth, **headers})
                assert (resp.status_code, resp.json()["error"]["kind"]) == (status, kind), path
            ended = httpx.post(f"{proxy}/episodes/{eid}/end", json={}, headers=auth).json()
            assert ended["turns"] == 1 and ended["error"] is None
            again = httpx.post(f"{proxy}/episodes/{eid}/end", json={}, headers=auth)
            assert (again.status_code, again.json()["error"]["kind"]) == (410, "session_closed")
            silent = httpx.post(f"{proxy}/episodes", json=body, headers=auth).json()["episode_id"]
            nothing = httpx.post(f"{proxy}/episodes/{silent}/end", json={}, headers=auth).json()
            assert nothing["error"]["kind"] == "agent_unavailable" and nothing["reward"] is None
    kinds = sorted(str(k) for k in read_rollouts(tmp_path)["failure_kind"].to_list())
    assert len(kinds) == 2 and "agent_unavailable" in kinds


def test_a_backend_that_is_down_is_a_policy_failure_not_a_reward(tmp_path):
    env = get_env("counter")
    task = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    with serve_on_loopback(FastAPI()) as gone:
        pass
    store = ProxyStore(tmp_path, "proxy-run", "down")
    backend = Backend(f"{gone}/v1", retries=1, backoff_s=0.01)
    with serve_on_loopback(build_proxy_app(backend, store=store)) as proxy:
        eid = _open(proxy, task)["episode_id"]
        chat = {"model": "m", "messages": task.prompt}
        resp = httpx.post(f"{proxy}/episodes/{eid}/v1/chat/completions", json=chat)
        assert (resp.status_code, resp.json()["error"]["kind"]) == (502, "policy_unavailable")
        ended = _end(proxy, eid)
        assert ended["policy_failed"] and ended["reward"] is None
    row = read_rollouts(tmp_path).row(0, named=True)
    assert row["reward"] is None and row["failure_kind"] == "policy_unavailable"


def test_an_episode_never_ended_is_closed_at_its_ttl_as_a_timeout_row(tmp_path):
    env = get_env("counter")
    task = build_tasks(env, 5, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    store = ProxyStore(tmp_path, "proxy-run", "x", chunk=1)
    app = build_proxy_app(Backend("http://127.0.0.1:9/v1"), store=store, episode_ttl_s=0.2)
    with serve_on_loopback(app) as proxy:
        eid = _open(proxy, task)["episode_id"]
        asyncio.run(asyncio.sleep(0.4))
        assert httpx.get(f"{proxy}/health").json()["episodes"] == 0
        gone = httpx.get(f"{proxy}/episodes/{eid}")
        assert gone.json()["error"]["kind"] == "session_closed"
    row = read_rollouts(Path(tmp_path)).row(0, named=True)
    assert row["failure_kind"] == "timeout" and row["reward"] is None
