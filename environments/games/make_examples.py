"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl``: ``python -m environments.games.make_examples``.

Tasks: one of each kind (4×4 and 9×9 sudoku answered in text, a 4×4 filled with the tool,
Nim against the optimal and the seeded opponent) from ``generate(…, seed=2026)``. Rollouts, in
NeMo Gym's rollout format: the gold episode of each task, played through the in-process
resources server, plus two adversarial ones (a victory claimed in text, a grid one cell short)
so the file shows a zero and a partial reward as well.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.environments.games.server import GamesServer

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.rollout.examples import play, rollout_rows

EXAMPLES = Path(__file__).resolve().parent / "examples"
SEED = 2026


def kind(task: Task) -> str:
    truth = task.ground_truth
    if truth["game"] == "nim":
        return f"nim-{truth['opponent']}"
    return f"sudoku{truth['size']}-{truth['mode']}"


def example_tasks(env: GamesServer) -> list[Task]:
    """The first generated task of each kind, in a fixed order of kinds."""
    wanted = ["sudoku4-answer", "sudoku9-answer", "sudoku4-tools", "nim-optimal", "nim-seeded"]
    found: dict[str, Task] = {}
    for task in build_tasks(env, 60, seed=SEED, heldout_frac=0.0, val_frac=0.0):
        found.setdefault(kind(task), task)
    return [found[k] for k in wanted]


def main() -> None:
    env = GamesServer()
    tasks = example_tasks(env)
    write_jsonl_atomic(EXAMPLES / "tasks.jsonl", [t.model_dump() for t in tasks])
    nim_task = next(t for t in tasks if t.ground_truth["game"] == "nim")
    sudoku_task = tasks[0]
    claims = next(p for p in env.probes(nim_task) if p.name == "claims_victory")
    short = next(p for p in env.probes(sudoku_task) if p.name == "one_blank_left")
    scripts = [(t, env.gold_turns(t)) for t in tasks]
    scripts += [(nim_task, [claims.text]), (sudoku_task, [short.text])]
    episodes = play(env, scripts)
    models = ["scripted-gold"] * len(tasks) + [f"scripted-probe-{p.name}" for p in (claims, short)]
    rows = rollout_rows(env, episodes, models)
    write_jsonl_atomic(EXAMPLES / "rollouts.jsonl", rows)
    print(f"{len(tasks)} tasks, {len(rows)} rollouts -> {EXAMPLES}")


if __name__ == "__main__":
    main()
