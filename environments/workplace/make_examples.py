"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.workplace.make_examples

Tasks: four real WorkBench tasks (one deletion, a three-record CRM reassignment, a conditional
whose right outcome is "change nothing", a two-domain request) and one synthetic task.
Rollouts, in NeMo Gym's rollout format, played through the in-process resources server by a
scripted policy: each task's gold episode (one call per turn), and two failing episodes (a
call on the wrong record, the gold plus an unrequested deletion).
"""

from __future__ import annotations

from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.environments.workplace.environment import WorkplaceEnvironment
from gymflow.environments.workplace.workbench import workbench_tasks
from gymflow.rollout.examples import adversarial, gold, write_examples

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


def example_tasks(env: WorkplaceEnvironment) -> list[Task]:
    real = {t.task_id: t for t in workbench_tasks()}
    synthetic = build_tasks(env, 10, seed=5, heldout_frac=0.1, val_frac=0.05)
    calendar = next(
        t for t in synthetic if t.ground_truth["calls"][0]["name"] == "calendar_create_event"
    )
    return [real[i] for i in REAL] + [calendar]


def main() -> None:
    env = WorkplaceEnvironment()
    tasks = example_tasks(env)
    by_id = {t.task_id: t for t in tasks}
    scripts = [gold(env, t) for t in tasks]
    for task_id, probe_name in FAILING:
        probe = next(p for p in env.probes(by_id[task_id]) if p.name == probe_name)
        scripts.append(adversarial(by_id[task_id], probe, "Done."))
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
