"""Rewrite ``examples/rollouts.jsonl`` from ``examples/tasks.jsonl``.

    python -m gymflow.environments.tool_call.make_examples

The five tasks stay as they are. Rollouts, in NeMo Gym's rollout format, played through the
in-process resources server by a scripted policy: each task's gold episode, then every probe
of the first task (see :func:`gymflow.rollout.examples.write_examples_from_tasks_file`).
"""

from __future__ import annotations

from gymflow.environments.tool_call.environment import ToolCallEnvironment
from gymflow.rollout.examples import write_examples_from_tasks_file


def main() -> None:
    write_examples_from_tasks_file(ToolCallEnvironment())


if __name__ == "__main__":
    main()
