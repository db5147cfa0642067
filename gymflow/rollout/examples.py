"""Example rollouts for an environment's ``examples/`` folder, in NeMo Gym's rollout format.

``python -m gymflow.rollout.examples ENV`` reads ``environments/ENV/examples/tasks.jsonl``, plays each
task's gold episode and the first task's adversarial probes through the in-process resources
server with a scripted policy, and writes ``examples/rollouts.jsonl`` (so the file shows full,
partial and zero rewards with their failure kinds). Environments with their own choice of
examples call :func:`play` and :func:`rollout_rows` from their ``make_examples.py``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.data.task_files import load_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Episode, Sampling
from gymflow.rollout.nemo_gym_rows import rollout_row


def play(env: Environment, scripts: list[tuple[Task, list[str]]]) -> list[Episode]:
    """One episode per ``(task, texts turn by turn)``, through the in-process server."""
    app = build_app(env)

    async def go() -> list[Episode]:
        episodes: list[Episode] = []
        async with EnvClient(app=app) as client:
            for task, turns in scripts:
                policy = ScriptedPolicy.replay(turns)
                sampling = Sampling(max_completion_tokens=1 << 20)  # scripted "tokens" are bytes
                episodes += await run_episodes(client, env, policy, [task], sampling, [0])
        return episodes

    return asyncio.run(go())


def rollout_rows(env: Environment, episodes: list[Episode], models: list[str]) -> list[dict]:
    return [rollout_row(ep, env, model) for ep, model in zip(episodes, models, strict=True)]


def main(env_name: str) -> Path:
    from gymflow.env.registry import get_env

    env = get_env(env_name)
    folder = Path(sys.modules[type(env).__module__].__file__).resolve().parent / "examples"
    tasks = list(load_tasks(env, folder / "tasks.jsonl", "gymflow").values())
    scripts = [(t, env.gold_turns(t)) for t in tasks]
    models = ["scripted-gold"] * len(tasks)
    for probe in env.probes(tasks[0]):
        scripts.append((tasks[0], [probe.text]))
        models.append(f"scripted-probe-{probe.name}")
    rows = rollout_rows(env, play(env, scripts), models)
    out = folder / "rollouts.jsonl"
    write_jsonl_atomic(out, rows)
    print(f"{len(rows)} rollouts ({len(tasks)} gold, {len(rows) - len(tasks)} probes) -> {out}")
    return out


if __name__ == "__main__":
    main(sys.argv[1])
