"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.math.make_examples

Tasks: two generated ones (a one-digit sum, a linear equation), two GSM8K test problems and
the first MATH-500 problem (a coordinate pair). Rollouts, in NeMo Gym's rollout format, played
through the in-process resources server by a scripted policy: each task's gold reply, and
three failing replies (a later wrong box, no answer at all, a tower of powers the checker
refuses).
"""

from __future__ import annotations

from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.environments.math.environment import MathEnvironment
from gymflow.environments.math.loaders import source_tasks
from gymflow.rollout.examples import adversarial, gold, write_examples

REAL = ("gsm8k_test_0", "gsm8k_test_1", "math500_0")
FAILING = ((2, "gold_then_wrong_box"), (4, "plain_text"), (1, "tower_of_powers"))
"""(index into the example tasks, probe name): gsm8k_test_0, math500_0, the equation."""


def example_tasks(env: MathEnvironment) -> list[Task]:
    generated = build_tasks(env, 10, seed=5, heldout_frac=0.1, val_frac=0.05)
    by_level = {t.ground_truth["level"]: t for t in reversed(generated)}
    real = {t.task_id: t for source in ("gsm8k", "math500") for t in source_tasks(source)}
    return [by_level[1], by_level[4], *(real[i] for i in REAL)]


def main() -> None:
    env = MathEnvironment()
    tasks = example_tasks(env)
    scripts = [gold(env, t) for t in tasks]
    for index, probe_name in FAILING:
        probe = next(p for p in env.probes(tasks[index]) if p.name == probe_name)
        scripts.append(adversarial(tasks[index], probe))
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
