"""The agent loop over several turns: tool calls, observations, the token view, isolation."""

from __future__ import annotations

import asyncio
import json

from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, TaskDraft
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling


class NotesEnv(Environment):
    """Store a note, read it back, then answer with it (3 turns, 2 stateful tools)."""

    name = "notes_test"
    max_turns = 3

    def tools(self):
        def put(session: dict, key: str, value: str) -> dict:
            """Store a note.

            Args:
                key: Note name.
                value: Note text.
            """
            session[key] = value
            return {"stored": key}

        def get(session: dict, key: str) -> dict:
            """Read a note.

            Args:
                key: Note name.
            """
            if key not in session:
                raise KeyError(key)
            return {"value": session[key]}

        return [put, get]

    def new_state(self, task):
        return {}

    def generate(self, n, seed):
        return [
            TaskDraft(
                [{"role": "user", "content": f"remember code-{seed}-{i}"}],
                {"value": f"code-{seed}-{i}"},
                seed,
            )
            for i in range(n)
        ]

    def verify(self, task, items) -> Score:
        final = [it for it in items if it["type"] == "message" and it.get("role") == "assistant"]
        ok = bool(final) and final[-1]["content"] == task.ground_truth["value"]
        return Score(reward=1.0 if ok else 0.0, success=ok, components={"answer": float(ok)})

    def gold_text(self, task):
        return task.ground_truth["value"]


def script(prompt: str, turn: int, observations: list[str]) -> str:
    value = prompt.split()[-1]
    if turn == 0:
        return render_call("put", {"key": "k", "value": value})
    if turn == 1:
        return render_call("get", {"key": "k"})
    return json.loads(observations[-1])["value"]


def test_three_turn_episodes_are_verified_isolated_and_closed():
    env = NotesEnv()
    app = build_app(env)
    tasks = build_tasks(env, 6, seed=3, heldout_frac=0.0, val_frac=0.0)

    async def go():
        async with EnvClient(app=app) as client:
            return await run_episodes(
                client, env, ScriptedPolicy(script), tasks, Sampling(), list(range(6))
            )

    episodes = asyncio.run(go())
    assert [e.reward for e in episodes] == [1.0] * 6  # each episode read back its own note
    ep = episodes[0]
    assert ep.turns == 3 and ep.tool_calls == 2
    kinds = [it["type"] for it in ep.items]
    assert kinds == [
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert len(ep.completion_ids) == len(ep.logprobs) == len(ep.env_mask)
    assert 0 in ep.env_mask and ep.env_mask[0] == 1 and ep.env_mask[-1] == 1
    observations = [it["output"] for it in ep.items if it["type"] == "function_call_output"]
    policy = ScriptedPolicy(script)
    assert ep.env_mask.count(0) == sum(len(policy.encode_observation(o)) for o in observations)
    assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if m == 0)
    assert not app.state.sessions.live, "every session must be closed after its episode"


def test_tool_error_is_an_observation_not_a_crash():
    env = NotesEnv()
    app = build_app(env)
    tasks = build_tasks(env, 1, seed=4, heldout_frac=0.0, val_frac=0.0)

    def forgetful(prompt: str, turn: int, observations: list[str]) -> str:
        return render_call("get", {"key": "missing"}) if turn < 2 else "no idea"

    async def go():
        async with EnvClient(app=app) as client:
            budget = Sampling(max_completion_tokens=2048)
            return await run_episodes(client, env, ScriptedPolicy(forgetful), tasks, budget, [0])

    (ep,) = asyncio.run(go())
    outputs = [json.loads(it["output"]) for it in ep.items if it["type"] == "function_call_output"]
    assert outputs and all(o["error"]["kind"] == "tool_error" for o in outputs)
    assert ep.reward == 0.0 and ep.turns == 3


def test_token_budget_ends_an_episode_as_truncated():
    env = NotesEnv()
    app = build_app(env)
    tasks = build_tasks(env, 1, seed=5, heldout_frac=0.0, val_frac=0.0)

    async def go():
        async with EnvClient(app=app) as client:
            tight = Sampling(max_new_tokens=48, max_completion_tokens=120)
            return await run_episodes(client, env, ScriptedPolicy(script), tasks, tight, [0])

    (ep,) = asyncio.run(go())
    assert ep.truncated and ep.score["failure_kind"] == "truncated" and ep.turns < 3
