"""Rebuild ``tasks.jsonl`` (five tasks) and ``rollouts.jsonl`` (their episodes) in this folder.

    python -m environments.workplace.examples.make_examples

Tasks: four real WorkBench tasks (one deletion, a three-record CRM reassignment, a conditional
whose right outcome is "change nothing", a two-domain request) and one synthetic task, as
gymflow Task rows (``tools`` left out; readers fill in the environment's). Rollouts: each
task's gold episode through the in-process resources server (scripted policy, one call per
turn), and two failing episodes (a call on the wrong record, the gold plus an unrequested
deletion), as NeMo Gym rollout rows (:func:`gymflow.data.nemo_gym.rollout_row`).
"""

from __future__ import annotations

import json
from pathlib import Path

from gymflow.environments.workplace import WorkplaceServer
from gymflow.environments.workplace.workbench import workbench_tasks

from gymflow.data.task_set import build_tasks
from gymflow.rollout.examples import play
from gymflow.rollout.nemo_gym_rows import rollout_row

HERE = Path(__file__).parent
REAL = (
    "workbench_email_0",
    "workbench_customer_relationship_manager_40",
    "workbench_analytics_30",
    "workbench_multi_domain_151",
)
FAILING = (
    ("workbench_email_0", "wrong_record"),
    ("workbench_multi_domain_151", "gold_plus_unrequested_delete"),
)


def example_tasks(env: WorkplaceServer) -> list:
    real = {t.task_id: t for t in workbench_tasks()}
    synthetic = build_tasks(env, 10, seed=5, heldout_frac=0.1, val_frac=0.05)
    calendar = next(
        t for t in synthetic if t.ground_truth["calls"][0]["name"] == "calendar_create_event"
    )
    return [real[i] for i in REAL] + [calendar]


def main() -> None:
    env = WorkplaceServer()
    tasks = example_tasks(env)
    by_id = {t.task_id: t for t in tasks}
    scripts = [(t, env.gold_turns(t)) for t in tasks]
    for task_id, probe_name in FAILING:
        probe = next(p for p in env.probes(by_id[task_id]) if p.name == probe_name)
        scripts.append((by_id[task_id], [probe.text, "Done."]))

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
