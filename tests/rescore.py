"""Re-scoring rollouts two ways, for the round-trip tests: ``gymflow verify`` on a file and a
served environment's ``/verify`` over real HTTP (both read items the one way,
:func:`gymflow.env.items.normalize_items`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.trajectory import prompt_items
from gymflow.data.task_files import load_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import serve_on_loopback
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app

runner = CliRunner()


def verify_cli(env: str, tasks: Path, rows: list[dict], tmp_path: Path, *extra: str) -> list:
    responses, out = tmp_path / "responses.jsonl", tmp_path / "scores.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["verify", "--env", env, "--tasks", str(tasks), "--responses", str(responses)]
    result = runner.invoke(app, [*args, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def served_rewards(env_name: str, tasks_file: Path, rows: list[dict]) -> list[float]:
    """Each NeMo Gym rollout row's items sent as they are to ``/verify`` over real HTTP."""
    env = get_env(env_name)
    tasks = load_tasks(env, tasks_file)

    async def score_all(url: str) -> list[float]:
        async with EnvClient(base_url=url) as client:
            rewards = []
            for row in rows:
                task = tasks[row["task_id"]]
                sid = await client.seed_session(task)
                items = prompt_items(task.prompt) + row["response"]["output"]
                rewards.append((await client.verify(sid, items, close=True))["reward"])
            return rewards

    with serve_on_loopback(build_app(env)) as url:
        return asyncio.run(score_all(url))


def assert_rescored_as_recorded(env: str, tasks_file: Path, rows: list[dict], tmp_path: Path):
    recorded = [row["reward"] for row in rows]
    assert len(recorded) >= 5
    as_rollouts = verify_cli(env, tasks_file, rows, tmp_path)
    assert [s["reward"] for s in as_rollouts] == recorded
    as_outputs = verify_cli(
        env, tasks_file,
        [{"task_id": r["task_id"], "output": r["response"]["output"]} for r in rows], tmp_path,
    )  # fmt: skip
    assert [s["reward"] for s in as_outputs] == recorded
    assert served_rewards(env, tasks_file, rows) == recorded
