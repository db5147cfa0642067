"""Rewrite ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl``.

    python -m gymflow.environments.toolbox.make_examples

Five tasks, one of each kind: one call, a nested argument, declining, two and three calls (the
last on a held-out, unseen tool); each task's gold episode, then every probe of the two-call
task (see :func:`gymflow.rollout.examples.write_examples`).
"""

from __future__ import annotations

from gymflow.data.task_set import build_tasks
from gymflow.environments.toolbox.environment import ToolboxEnvironment
from gymflow.rollout.examples import adversarial, gold, write_examples

KINDS = ("single", "nested", "refusal", "parallel2", "parallel3")


def main() -> None:
    env = ToolboxEnvironment()
    tasks = build_tasks(env, 200, 2026, 0.1, 0.05)
    picked = [next(t for t in tasks if t.ground_truth["family"] == kind) for kind in KINDS[:-1]]
    picked.append(
        next(
            t
            for t in tasks
            if t.ground_truth["family"] == "parallel3" and t.ground_truth["source"] == "unseen"
        )
    )
    scripts = [gold(env, t) for t in picked]
    scripts += [adversarial(picked[3], p) for p in env.probes(picked[3])]
    write_examples(env, picked, scripts)


if __name__ == "__main__":
    main()
