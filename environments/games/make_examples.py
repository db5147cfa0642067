"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.games.make_examples

Tasks: one of each kind (4×4 and 9×9 sudoku answered in text, a 4×4 filled with the tool,
Nim against the optimal and the seeded opponent) from ``generate(…, seed=2026)``. Rollouts, in
NeMo Gym's rollout format: the gold episode of each task, played through the in-process
resources server, plus two adversarial ones (a victory claimed in text, a grid one cell short)
so the file shows a zero and a partial reward as well.
"""

from __future__ import annotations

from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.environments.games.environment import GamesEnvironment
from gymflow.rollout.examples import adversarial, gold, write_examples

SEED = 2026


def kind(task: Task) -> str:
    truth = task.ground_truth
    if truth["game"] == "nim":
        return f"nim-{truth['opponent']}"
    return f"sudoku{truth['size']}-{truth['mode']}"


def example_tasks(env: GamesEnvironment) -> list[Task]:
    """The first generated task of each kind, in a fixed order of kinds."""
    wanted = ["sudoku4-answer", "sudoku9-answer", "sudoku4-tools", "nim-optimal", "nim-seeded"]
    found: dict[str, Task] = {}
    for task in build_tasks(env, 60, seed=SEED, heldout_frac=0.0, val_frac=0.0):
        found.setdefault(kind(task), task)
    return [found[k] for k in wanted]


def main() -> None:
    env = GamesEnvironment()
    tasks = example_tasks(env)
    nim_task = next(t for t in tasks if t.ground_truth["game"] == "nim")
    sudoku_task = tasks[0]
    claims = next(p for p in env.probes(nim_task) if p.name == "claims_victory")
    short = next(p for p in env.probes(sudoku_task) if p.name == "one_blank_left")
    scripts = [gold(env, t) for t in tasks]
    scripts += [adversarial(nim_task, claims), adversarial(sudoku_task, short)]
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
