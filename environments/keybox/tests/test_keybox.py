"""keybox: the pure verifier, the self-check, and the claim the environment is built on — the
demonstrations' behaviour (open a box, answer its colour) succeeds about one time in three, a
search that reads the tool's output every time — played through the real server."""

from __future__ import annotations

import asyncio
import json

from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.keybox.environment import KeyboxEnvironment
from gymflow.environments.keybox.verifier import opened, score
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.env_check import check_environment
from gymflow.rollout.episode import Sampling

TRUTH = {"boxes": ["red", "blue", "green"], "key": "blue"}


def _open(i: int, label, holds: str | None = "nothing") -> list[dict]:
    out = '{"error": {"kind": "tool_error"}}' if holds is None else json.dumps({"box": label, "holds": holds})  # fmt: skip
    return [
        {"type": "function_call", "call_id": f"c{i}", "name": "open_box",
         "arguments": json.dumps({"label": label})},
        {"type": "function_call_output", "call_id": f"c{i}", "output": out},
    ]  # fmt: skip


def _answer(text: str) -> list[dict]:
    return [{"type": "message", "role": "assistant", "content": text}]


def test_a_search_that_finds_the_key_and_names_it_scores_one():
    items = _open(0, "red") + _open(1, "blue", "the key") + _answer("blue")
    s = score(TRUTH, items)
    assert (s.reward, s.success, s.components) == (1.0, True, {"found": 1.0, "answer": 1.0})
    assert opened(items) == ["red", "blue"]


def test_naming_the_right_box_without_opening_it_scores_zero():
    for items in (_answer("blue"), _open(0, "red") + _answer("blue")):
        s = score(TRUTH, items)
        assert s.reward == 0.0 and s.failure_kind == "wrong_answer"
        assert "without opening" in s.detail


def test_a_failed_call_does_not_count_as_opening():
    s = score(TRUTH, _open(0, "blue", holds=None) + _answer("blue"))
    assert s.reward == 0.0 and s.components["found"] == 0.0


def test_wrong_answers_and_missing_answers_score_zero():
    assert score(TRUTH, _open(0, "blue", "the key") + _answer("red")).failure_kind == "wrong_answer"
    assert score(TRUTH, _open(0, "blue", "the key") + _answer("blue green")).reward == 0.0
    assert score(TRUTH, _open(0, "blue", "the key")).failure_kind == "no_answer"
    broken = [{"type": "message", "role": "assistant", "content": "<tool_call>{",
               "parse_error": "invalid_json: unterminated"}]  # fmt: skip
    assert score(TRUTH, broken + _answer("blue")).failure_kind == "invalid_json"


def test_env_check_passes():
    golds, probes, problems = check_environment(KeyboxEnvironment(), 60)
    assert golds > 50 and probes == 7 * golds and problems == []


def _play(env, tasks, respond) -> list[float]:
    app = build_app(env)

    async def go():
        async with EnvClient(app=app) as client:
            eps = await run_episodes(
                client, env, ScriptedPolicy(respond), tasks, Sampling(max_completion_tokens=1 << 20),
                list(range(len(tasks))),
            )  # fmt: skip
        return [e.reward for e in eps]

    return asyncio.run(go())


def test_imitating_the_demonstrations_succeeds_a_third_of_the_time_searching_always():
    """The gold episodes open one box and answer its colour. A policy doing that without the
    oracle's knowledge (the first box listed) is right when the key is there; a policy that
    opens the next box while the last one held nothing is always right."""
    env = KeyboxEnvironment()
    tasks = build_tasks(env, 300, seed=4, heldout_frac=0.0, val_frac=0.0)
    boxes = {t.prompt[0]["content"]: t.ground_truth["boxes"] for t in tasks}

    def imitate(prompt, turn, observations):
        first = boxes[prompt][0]
        return render_call("open_box", {"label": first}) if turn == 0 else first

    def search(prompt, turn, observations):
        if observations and json.loads(observations[-1])["holds"] == "the key":
            return json.loads(observations[-1])["box"]
        return render_call("open_box", {"label": boxes[prompt][turn]})

    imitated = _play(env, tasks, imitate)
    assert 0.25 < sum(imitated) / len(imitated) < 0.42, sum(imitated) / len(imitated)
    assert _play(env, tasks, search) == [1.0] * len(tasks)
    assert all(
        env.gold_turns(t) == [render_call("open_box", {"label": t.ground_truth["key"]}),
                              t.ground_truth["key"]]
        for t in tasks
    )  # fmt: skip
