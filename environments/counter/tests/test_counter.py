"""counter: pure verifier cases, and gold episodes through the real server, concurrently."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gymflow.core.jsonl import InputFileError
from gymflow.core.tool_calls import render_call
from gymflow.data.task_files import load_tasks
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment, score
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.env_check import check_environment
from gymflow.rollout.episode import Sampling

NEMO_TASKS = Path(__file__).resolve().parents[1] / "examples/nemo_gym_tasks.jsonl"

TRUTH = {"initial_count": 3, "increments": [1, 2], "expected_count": 6}


def _call(i: int, count, error: bool = False) -> list[dict]:
    out = '{"error": {"kind": "tool_error"}}' if error else '{"count": 0}'
    return [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": "increment_counter",
            "arguments": f'{{"count": {count}}}',
        },
        {"type": "function_call_output", "call_id": f"c{i}", "output": out},
    ]


def _answer(text: str) -> list[dict]:
    return [{"type": "message", "role": "assistant", "content": text}]


def test_replayed_calls_and_answer_give_reward_one():
    assert score(TRUTH, _call(0, 1) + _call(1, 2) + _answer("6")).reward == 1.0


def test_right_answer_without_the_calls_scores_zero():
    s = score(TRUTH, _answer("6"))
    assert s.reward == 0.0 and s.failure_kind == "bad_arguments"


def test_failed_and_mistyped_calls_do_not_count():
    assert (
        score(TRUTH, _call(0, 1) + _call(1, 2, error=True) + _call(2, 2) + _answer("6")).reward
        == 1.0
    )
    assert score(TRUTH, _call(0, 1) + _call(1, '"2"') + _answer("6")).reward == 0.0


def test_wrong_final_answer_scores_zero():
    s = score(TRUTH, _call(0, 1) + _call(1, 2) + _answer("7"))
    assert s.reward == 0.0 and s.components == {"state": 1.0, "answer": 0.0}


def test_env_check_passes():
    golds, probes, problems = check_environment(CounterEnvironment(), 60)
    assert golds > 50 and probes == 3 * golds and problems == []


def test_concurrent_sessions_do_not_share_counters():
    env = CounterEnvironment()
    app = build_app(env)
    tasks = build_tasks(env, 200, seed=11, heldout_frac=0.0, val_frac=0.0)
    turns = {t.task_id: env.gold_turns(t) for t in tasks}

    async def one(client, task):
        policy = ScriptedPolicy.replay(turns[task.task_id])
        return await run_episodes(
            client, env, policy, [task], Sampling(max_completion_tokens=1 << 20), [0]
        )

    async def go():
        async with EnvClient(app=app) as client:
            return await asyncio.gather(*(one(client, t) for t in tasks))

    episodes = [ep for batch in asyncio.run(go()) for ep in batch]
    assert all(ep.reward == 1.0 for ep in episodes)
    assert not app.state.sessions.live


def test_nemo_gym_rows_import_with_content_hash_ids_and_gold_turns_that_follow_the_request():
    env = CounterEnvironment()
    tasks = list(load_tasks(env, NEMO_TASKS, "nemo_gym").values())
    assert [t.ground_truth for t in tasks][0] == {"initial_count": 3, "expected_count": 6}
    assert all(
        t.task_id == f"counter-{t.content_hash[:12]}" and t.split == "heldout" for t in tasks
    )
    assert env.gold_turns(tasks[0])[:2] == [
        render_call("increment_counter", {"count": 1}),
        render_call("increment_counter", {"count": 2}),
    ]
    # A request whose numbers do not add up still gets a perfect episode: one call for the rest.
    odd = env.import_nemo_gym({**_row(), "expected_count": 10})
    assert env.gold_turns(odd)[0] == render_call("increment_counter", {"count": 7})


def _row() -> dict:
    return json.loads(NEMO_TASKS.read_text().splitlines()[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expected_count": "6"}, "not a nemo_gym task: expected_count must be an integer"),
        ({"initial_count": None}, "not a nemo_gym task: missing field 'initial_count'"),
        ({"responses_create_params": {"input": "add 1", "tools": [{"name": "reset"}]}}, "reset"),
    ],
)
def test_bad_nemo_gym_rows_name_the_line_and_the_problem(tmp_path, change, message):
    row = {k: v for k, v in {**_row(), **change}.items() if v is not None}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputFileError, match=f"t.jsonl:2: .*{message}"):
        load_tasks(CounterEnvironment(), path, "nemo_gym")
