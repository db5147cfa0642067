"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.code.make_examples

Tasks: four generated ones (``seed=2026``) and HumanEval/0. Rollouts, in NeMo Gym's rollout
format, each played through the in-process resources server by a scripted policy: the gold
answer of the first three, a stub that returns ``None`` for the fourth, and the
``read_passwd`` attack on HumanEval/0, so a reader sees a reward of 1 and two failure kinds.
``tests/test_code_env.py`` re-scores them.
"""

from __future__ import annotations

from gymflow.data.task_set import build_tasks
from gymflow.environments.code.environment import CodeEnvironment
from gymflow.environments.code.humaneval import load_tasks
from gymflow.environments.code.probes import all_probes
from gymflow.rollout.examples import Script, adversarial, gold, write_examples

SEED = 2026
WRONG = "```python\ndef {0}(*args):\n    return None\n```"


def main() -> None:
    env = CodeEnvironment()
    tasks = build_tasks(env, 4, seed=SEED, heldout_frac=0.1, val_frac=0.05)[:4]
    tasks.append(load_tasks()[0])
    attack = next(p for p in all_probes(tasks[4].ground_truth) if p.name == "read_passwd")
    scripts = [gold(env, t) for t in tasks[:3]]
    wrong = WRONG.format(tasks[3].ground_truth["entry_point"])
    scripts.append(Script(tasks[3], [wrong], "scripted-wrong_answer"))
    scripts.append(adversarial(tasks[4], attack))
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
