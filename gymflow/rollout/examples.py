"""Example tasks and rollouts for an environment's ``examples/`` folder, in NeMo Gym's rollout format.

Every environment writes its examples the same way, from ``environments/<name>/make_examples.py``
(``python -m gymflow.environments.<name>.make_examples``): it picks a few tasks and the scripted
episodes to show — each task's gold episode and a few adversarial ones, so the file shows full,
partial and zero rewards with their failure kinds — and hands them to :func:`write_examples`,
which plays them through the in-process resources server and writes ``examples/tasks.jsonl``
and ``examples/rollouts.jsonl``. Task rows leave out ``tools`` when they are the environment's
own (readers fill them in, see :func:`gymflow.data.task_files.import_gymflow`); a rollout row's
``response.model`` says which script played it (``scripted-gold``, ``scripted-probe-<name>``).

An environment whose ``tasks.jsonl`` is kept as it is uses :func:`write_examples_from_tasks_file`
(each task's gold episode, then every probe of the first task);
``python -m gymflow.rollout.examples NAME`` does the same for any registered environment,
installed plugins included.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.data.task_files import load_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, Probe, examples_folder
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Episode, Sampling
from gymflow.rollout.nemo_gym_rows import rollout_row


@dataclass(frozen=True)
class Script:
    """One example episode: the texts a scripted policy writes turn by turn on ``task``, and the
    ``model`` name its rollout row shows."""

    task: Task
    turns: list[str]
    model: str


def gold(env: Environment, task: Task) -> Script:
    """The perfect episode (``env.gold_turns``)."""
    return Script(task, env.gold_turns(task), "scripted-gold")


def adversarial(task: Task, probe: Probe, *then: str) -> Script:
    """The probe's text as the first turn, then the turns ``then`` (e.g. ``"Done."``)."""
    return Script(task, [probe.text, *then], f"scripted-probe-{probe.name}")


def task_row(env: Environment, task: Task) -> dict:
    """``task`` as a ``tasks.jsonl`` row: ``tools`` left out when they are the environment's."""
    exclude = {"tools"} if task.tools == env.tool_schemas else None
    return task.model_dump(exclude=exclude)


def play(env: Environment, scripts: list[tuple[Task, list[str]]]) -> list[Episode]:
    """One episode per ``(task, texts turn by turn)``, in order, through the in-process server.

    One verifier worker is enough (the episodes run one after another); a ``heavy_verify``
    environment's worker process is stopped before this returns.
    """
    app = build_app(env, verify_workers=1)
    sampling = Sampling(max_completion_tokens=1 << 20)  # scripted "tokens" are bytes

    async def go() -> list[Episode]:
        episodes: list[Episode] = []
        async with EnvClient(app=app) as client:
            for task, turns in scripts:  # one policy per episode: two tasks may share a prompt
                policy = ScriptedPolicy.replay(turns)
                episodes += await run_episodes(client, env, policy, [task], sampling, [0])
        return episodes

    try:
        return asyncio.run(go())
    finally:
        app.state.verifier.shutdown()


def write_examples(
    env: Environment, tasks: list[Task], scripts: list[Script], folder: Path | None = None
) -> list[Episode]:
    """Play ``scripts``; write ``tasks.jsonl`` (``tasks``) and ``rollouts.jsonl`` (one row per
    script, in order) into ``folder`` (default :func:`examples_folder`); print one line each."""
    folder = folder or examples_folder(env)
    episodes = play(env, [(s.task, s.turns) for s in scripts])
    write_jsonl_atomic(folder / "tasks.jsonl", [task_row(env, t) for t in tasks])
    rows = [rollout_row(ep, env, s.model) for ep, s in zip(episodes, scripts, strict=True)]
    write_jsonl_atomic(folder / "rollouts.jsonl", rows)
    print(f"{len(tasks)} tasks, {len(rows)} rollouts -> {folder}")
    for ep, script in zip(episodes, scripts, strict=True):
        print(f"  {ep.task.task_id} {script.model}: {ep.reward} {ep.score['failure_kind']}")
    return episodes


def write_examples_from_tasks_file(env: Environment) -> list[Episode]:
    """Keep ``examples/tasks.jsonl``; rewrite ``rollouts.jsonl``: each task's gold episode, then
    every probe of the first task."""
    folder = examples_folder(env)
    tasks = list(load_tasks(env, folder / "tasks.jsonl").values())
    scripts = [gold(env, t) for t in tasks]
    scripts += [adversarial(tasks[0], p) for p in env.probes(tasks[0])]
    return write_examples(env, tasks, scripts, folder)


def main(env_name: str) -> None:
    from gymflow.env.registry import get_env

    write_examples_from_tasks_file(get_env(env_name))


if __name__ == "__main__":
    main(sys.argv[1])
