"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.reasoning_gym.make_examples

Tasks: the first generated task of five families of the default mix (``seed=2026``). Rollouts,
in NeMo Gym's rollout format: each task's gold episode plus two adversarial ones on the first
task (the question echoed inside the answer tags, the right answer without the tags), played
through the in-process resources server (the verifier in its process pool).
"""

from __future__ import annotations

from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.environments.reasoning_gym.environment import ReasoningGymEnvironment
from gymflow.rollout.examples import adversarial, gold, write_examples

SEED = 2026
FAMILIES = ("leg_counting", "chain_sum", "word_sorting", "base_conversion", "simple_equations")
SHOWN_PROBES = ("question_echoed", "no_answer_block")


def example_tasks(env: ReasoningGymEnvironment) -> list[Task]:
    """The first generated task of each of :data:`FAMILIES`, in that order."""
    found: dict[str, Task] = {}
    for task in build_tasks(env, 80, seed=SEED, heldout_frac=0.0, val_frac=0.0):
        found.setdefault(task.ground_truth["family"], task)
    return [found[f] for f in FAMILIES]


def main() -> None:
    env = ReasoningGymEnvironment()
    tasks = example_tasks(env)
    scripts = [gold(env, t) for t in tasks]
    scripts += [adversarial(tasks[0], p) for p in env.probes(tasks[0]) if p.name in SHOWN_PROBES]
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
