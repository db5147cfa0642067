"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl``.

    python -m gymflow.environments.keybox.make_examples

Five generated tasks. Rollouts, in NeMo Gym's rollout format, played through the in-process
resources server by a scripted policy: each task's gold (oracle) episode, a search that opens
the boxes in the listed order until it finds the key (what the verifier rewards and the gold
episodes never show), then every probe of the first task.
"""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.environments.keybox.environment import KeyboxEnvironment
from gymflow.rollout.examples import Script, adversarial, gold, write_examples


def search(task) -> list[str]:
    """Open the boxes in the listed order up to the key's, then answer its colour."""
    boxes, key = task.ground_truth["boxes"], task.ground_truth["key"]
    upto = boxes[: boxes.index(key) + 1]
    return [render_call("open_box", {"label": b}) for b in upto] + [key]


def main() -> None:
    env = KeyboxEnvironment()
    tasks = build_tasks(env, 5, seed=7, heldout_frac=0.0, val_frac=0.0)
    scripts = [gold(env, t) for t in tasks]
    scripts += [Script(t, search(t), "scripted-search") for t in tasks[:2]]
    scripts += [adversarial(tasks[0], p) for p in env.probes(tasks[0])]
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
