"""``gymflow env check``: hold an environment to its contract through its real server.

Each generated task is played through the in-process resources server by a scripted policy:
the gold episode (``gold_turns``) must score exactly 1.0 with success, and every adversarial
probe (as a one-turn answer) must score at most its ceiling and never succeed. Running through
the server also exercises the session contract (seed, tools, verify, close).
"""

from __future__ import annotations

import asyncio

from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling


def check_environment(env: Environment, n: int, seed: int = 7) -> tuple[int, int, list[str]]:
    """Return ``(gold episodes, probes, problems)``; no problems means the contract holds."""
    tasks = build_tasks(env, n, seed=seed, heldout_frac=0.0, val_frac=0.0)
    app = build_app(env)
    problems: list[str] = []
    sampling = Sampling(max_completion_tokens=1 << 20)

    async def go():
        async with EnvClient(app=app) as client:
            golds = []
            for task in tasks:  # one policy per task: two tasks may share a prompt
                golds += await run_episodes(
                    client, env, ScriptedPolicy.replay(env.gold_turns(task)), [task], sampling, [0]
                )
            probe_runs = []
            for task in tasks:
                for probe in env.probes(task):
                    (ep,) = await run_episodes(
                        client, env, ScriptedPolicy.replay([probe.text]), [task], sampling, [0]
                    )
                    probe_runs.append((probe, ep))
            return golds, probe_runs

    golds, probe_runs = asyncio.run(go())
    for ep in golds:
        if not (ep.score["success"] and ep.reward == 1.0):
            problems.append(
                f"gold {ep.task.task_id}: {ep.reward} {ep.score['failure_kind']} {ep.score['detail']}"
            )
    for probe, ep in probe_runs:
        if ep.reward > probe.max_reward or ep.score["success"]:
            problems.append(
                f"probe {probe.name} on {ep.task.task_id}: {ep.reward} > {probe.max_reward}"
            )
    if app.state.sessions.live:
        problems.append(f"{len(app.state.sessions.live)} sessions left open after their episodes")
    return len(golds), len(probe_runs), problems
