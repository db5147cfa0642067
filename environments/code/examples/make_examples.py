"""Write ``tasks.jsonl`` (5 tasks) and ``rollouts.jsonl`` (their episodes) in this folder.

    .venv/bin/python environments/code/examples/make_examples.py

Tasks: four generated ones (seed 2026) and HumanEval/0. Rollouts: each task played through
the real resources server by a scripted policy — the gold answer for three, a wrong answer
and an attack for the others — written as NeMo Gym rollout rows
(:func:`gymflow.data.nemo_gym.write_rollouts_jsonl`), so a reader sees a reward of 1 and two
failure kinds. ``tests/test_code_env.py`` re-scores them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gymflow.environments.code import CodeServer
from gymflow.environments.code.humaneval import load_tasks
from gymflow.environments.code.probes import all_probes

from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.nemo_gym_rows import write_rollouts_jsonl

HERE = Path(__file__).parent


def main() -> None:
    env = CodeServer()
    tasks = build_tasks(env, 4, seed=2026, heldout_frac=0.1, val_frac=0.05)[:4]
    tasks.append(load_tasks()[0])
    with open(HERE / "tasks.jsonl", "w") as fh:
        for task in tasks:
            fh.write(json.dumps(task.model_dump(), ensure_ascii=False) + "\n")
    wrong = "```python\ndef {0}(*args):\n    return None\n```"
    answers = [env.gold_text(t) for t in tasks[:3]]
    answers.append(wrong.format(tasks[3].ground_truth["entry_point"]))
    answers.append(
        next(p.text for p in all_probes(tasks[4].ground_truth) if p.name == "read_passwd")
    )

    async def play():
        async with EnvClient(app=build_app(env)) as client:
            episodes = []
            for task, answer in zip(tasks, answers, strict=True):
                policy = ScriptedPolicy.replay([answer])
                sampling = Sampling(max_new_tokens=1 << 16, max_completion_tokens=1 << 20)
                episodes += await run_episodes(client, env, policy, [task], sampling, [0])
            return episodes

    write_rollouts_jsonl(HERE / "rollouts.jsonl", asyncio.run(play()), env)


if __name__ == "__main__":
    main()
