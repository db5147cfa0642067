"""workplace through the real resources server: env check, all 690 gold episodes, isolated
sessions, tool errors as observations, and the examples folder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import import_gymflow
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.workplace import WorkplaceEnvironment
from gymflow.environments.workplace.workbench import workbench_tasks
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.env_check import check_environment
from gymflow.rollout.episode import Sampling

EXAMPLES = Path(__file__).parents[1] / "examples"
ENV = WorkplaceEnvironment()
SAMPLING = Sampling(max_completion_tokens=1 << 20)


def _run(coro_fn):
    async def go():
        async with EnvClient(app=build_app(ENV)) as client:
            return await coro_fn(client)

    return asyncio.run(go())


def test_env_check_passes():
    golds, probes, problems = check_environment(ENV, 60)
    assert golds == 60 and probes >= 4 * golds and problems == []


def test_all_690_gold_episodes_score_one_through_the_server():
    tasks = workbench_tasks()

    async def play(client):
        async def one(task):
            policy = ScriptedPolicy.replay(ENV.gold_turns(task))
            return await run_episodes(client, ENV, policy, [task], SAMPLING, [0])

        return [ep for batch in await asyncio.gather(*(one(t) for t in tasks)) for ep in batch]

    episodes = _run(play)
    failed = [(ep.task.task_id, ep.score) for ep in episodes if ep.reward != 1.0]
    assert len(episodes) == 690 and failed == []
    assert max(ep.turns for ep in episodes) == 13 <= ENV.max_turns


def test_sessions_are_isolated_copies_of_one_sandbox():
    task = workbench_tasks()[0]

    async def play(client):
        a, b = await client.seed_session(task), await client.seed_session(task)
        read = {"email_id": "00000479", "field": "subject"}
        deleted = await client.call_tool(a, "email_delete_email", {"email_id": "00000479"})
        gone = await client.call_tool(a, "email_get_email_information_by_id", read)
        still = await client.call_tool(b, "email_get_email_information_by_id", read)
        sent = await client.call_tool(
            b, "email_send_email", {"recipient": "x@y.com", "subject": "s", "body": "b"}
        )
        found_a = await client.call_tool(a, "email_search_emails", {"query": "x@y.com"})
        await client.close_session(a)
        c = await client.seed_session(task)
        fresh = await client.call_tool(c, "email_get_email_information_by_id", read)
        for sid in (b, c):
            await client.close_session(sid)
        return deleted, gone, still, sent, found_a, fresh

    deleted, gone, still, sent, found_a, fresh = _run(play)
    assert deleted == {"output": "Email deleted successfully.", "error": None}
    assert gone["output"] is None and gone["error"]["kind"] == "tool_error"
    assert "Email not found" in gone["error"]["message"]
    assert still["error"] is None and fresh["error"] is None and sent["error"] is None
    assert found_a["output"] == "No emails found."


def test_bad_calls_come_back_as_observations_with_a_kind():
    task = workbench_tasks()[0]

    async def play(client):
        sid = await client.seed_session(task)
        out = [
            await client.call_tool(sid, "email_delete_email", {"email_id": 479}),
            await client.call_tool(sid, "email_delete_email", {}),
            await client.call_tool(sid, "email_purge", {}),
            await client.call_tool(sid, "calendar_delete_event", {"event_id": "12"}),
            await client.call_tool(sid, "email_search_emails", {"page_size": 0}),
        ]
        await client.close_session(sid)
        return out

    kinds = [r["error"]["kind"] for r in _run(play)]
    assert kinds == ["bad_arguments", "bad_arguments", "unknown_tool", "tool_error", "tool_error"]


def test_example_tasks_load_and_their_gold_scores_one():
    rows = [json.loads(line) for line in (EXAMPLES / "tasks.jsonl").read_text().splitlines()]
    tasks = [import_gymflow(row, ENV) for row in rows]
    assert len(tasks) == 5 and sum(not t.ground_truth["calls"] for t in tasks) == 1
    for task in tasks:
        assert task.tools == ENV.tool_schemas
        items = prompt_items(task.prompt) + assistant_items(ENV.gold_text(task), 0)
        assert ENV.verify(task, items).reward == 1.0


def test_example_rollouts_rescore_to_their_recorded_rewards():
    tasks = {
        t["task_id"]: import_gymflow(t, ENV)
        for t in map(json.loads, (EXAMPLES / "tasks.jsonl").read_text().splitlines())
    }
    rows = [json.loads(line) for line in (EXAMPLES / "rollouts.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0] * 5 + [0.0, 0.0]
    for row in rows:
        task = tasks[row["task_id"]]
        items = prompt_items(task.prompt) + [_item(it) for it in row["response"]["output"]]
        s = ENV.verify(task, items)
        assert (s.reward, s.failure_kind) == (row["reward"], row["failure_kind"])


def _item(item: dict) -> dict:
    if item["type"] == "message":
        text = "".join(part["text"] for part in item["content"])
        return {"type": "message", "role": item["role"], "content": text}
    keys = (
        ("call_id", "name", "arguments")
        if item["type"] == "function_call"
        else ("call_id", "output")
    )
    return {"type": item["type"], **{k: item[k] for k in keys}}
