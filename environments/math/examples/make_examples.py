"""Rebuild ``tasks.jsonl`` (five tasks) and ``rollouts.jsonl`` (their episodes) in this folder.

    python -m environments.math.examples.make_examples

Tasks: two generated ones (a one-digit sum, a linear equation), two GSM8K test problems and
the first MATH-500 problem (a coordinate pair), as gymflow Task rows (``tools`` left out;
readers fill in the environment's, none). Rollouts: each task's gold reply through the
in-process resources server (scripted policy), and three failing replies (a later wrong
box, no answer at all, a tower of powers the checker refuses), as NeMo Gym rollout rows
(:func:`gymflow.data.nemo_gym.rollout_row`).
"""

from __future__ import annotations

import json
from pathlib import Path

from gymflow.environments.math import MathServer
from gymflow.environments.math.loaders import source_tasks

from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.rollout.examples import play
from gymflow.rollout.nemo_gym_rows import rollout_row

HERE = Path(__file__).parent
REAL = ("gsm8k_test_0", "gsm8k_test_1", "math500_0")
FAILING = ((2, "gold_then_wrong_box"), (4, "plain_text"), (1, "tower_of_powers"))
"""(index into the example tasks, probe name): gsm8k_test_0, math500_0, the equation."""


def example_tasks(env: MathServer) -> list[Task]:
    generated = build_tasks(env, 10, seed=5, heldout_frac=0.1, val_frac=0.05)
    by_level = {t.ground_truth["level"]: t for t in reversed(generated)}
    real = {t.task_id: t for source in ("gsm8k", "math500") for t in source_tasks(source)}
    return [by_level[1], by_level[4], *(real[i] for i in REAL)]


def main() -> None:
    env = MathServer()
    tasks = example_tasks(env)
    scripts = [(t, env.gold_turns(t)) for t in tasks]
    for index, probe_name in FAILING:
        probe = next(p for p in env.probes(tasks[index]) if p.name == probe_name)
        scripts.append((tasks[index], [probe.text]))

    episodes = play(env, scripts)
    with (HERE / "tasks.jsonl").open("w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(json.dumps(task.model_dump(exclude={"tools"}), ensure_ascii=False) + "\n")
    with (HERE / "rollouts.jsonl").open("w", encoding="utf-8") as fh:
        for episode in episodes:
            fh.write(json.dumps(rollout_row(episode, env), ensure_ascii=False) + "\n")
    for episode in episodes:
        print(episode.task.task_id, episode.reward, episode.score["failure_kind"])


if __name__ == "__main__":
    main()
