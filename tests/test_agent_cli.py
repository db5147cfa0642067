"""``gymflow agent serve | proxy | collect`` as a user runs them: real processes on free loopback
ports, real HTTP, a real rollout folder."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner
from ui_process import GYMFLOW, free_port

from gymflow.agent.runner import AgentService
from gymflow.cli.main import app
from gymflow.data.task_set import build_tasks
from gymflow.env.loopback import LoopbackServer
from gymflow.env.registry import get_env
from gymflow.policy.openai_server import build_openai_app
from gymflow.policy.spec import load_policy
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import plan, read_rollouts


def _started(args: list[str], *health: str, within_s: float = 90.0) -> subprocess.Popen:
    """The command, once every ``health`` URL answers."""
    proc = subprocess.Popen([GYMFLOW, *args], stderr=subprocess.PIPE)
    deadline = time.monotonic() + within_s
    waiting = list(health)
    while waiting:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, f"{args[:2]} did not start"
        try:
            if httpx.get(waiting[0], timeout=1).status_code == 200:
                waiting.pop(0)
        except httpx.TransportError:
            time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(20)


def test_agent_serve_with_two_workers_spreads_episodes_over_them():
    port = free_port()
    proc = _started(
        ["agent", "serve", "--port", str(port), "--workers", "2", "--trust-client-tasks"],
        f"http://127.0.0.1:{port}/health",
        f"http://127.0.0.1:{port + 1}/health",
    )
    try:
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert len(health["workers"]) == 2
        env = get_env("counter")
        tasks = build_tasks(env, 12, seed=1, heldout_frac=0.0, val_frac=0.0)[:6]
        service = AgentService((f"http://127.0.0.1:{port}",), "scripted:counter")
        done = []
        runner = service.runner(Sampling(max_completion_tokens=4096), 6)
        asyncio.run(runner(plan(tasks, "r", 0, 2, 0), lambda *r: done.append(r)))
        assert [ep.reward for _, ep, _ in done] == [1.0] * 12
        counts = [httpx.get(f"{url}/health").json()["episodes"] for url in health["workers"]]
        assert sum(counts) == 12 and min(counts) > 0  # the one URL was expanded to both
    finally:
        _stop(proc)


def test_agent_proxy_starts_and_refuses_a_public_bind_without_a_token(tmp_path):
    port = free_port()
    proc = _started(
        ["agent", "proxy", "--backend", "http://127.0.0.1:9/v1", "--port", str(port),
         "--out", str(tmp_path / "rows")],
        f"http://127.0.0.1:{port}/health",
    )  # fmt: skip
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/health").json()["kind"] == "proxy"
    finally:
        _stop(proc)
    refused = subprocess.run(
        [GYMFLOW, "agent", "proxy", "--backend", "http://x/v1", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: [unauthorized]") and refused.stderr[-1] == "\n"


def test_agent_collect_runs_an_sdk_agent_into_a_collection_and_resumes(tmp_path):
    env = get_env("tool_call")
    by_prompt = {t.prompt[0]["content"]: t for t in build_tasks(env, 40, 6, 0.0, 0.0)}
    tasks = list(by_prompt.values())[:3]
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t.model_dump()) + "\n" for t in tasks))
    out = tmp_path / "collected"
    gold = load_policy("scripted:tool_call", tasks=tasks)
    args = [
        "agent", "collect", "--agent", "examples/agents/openai_agents_sdk_agent.py:run",
        "--env", "tool_call", "--tasks", str(task_file), "--out", str(out), "--num-repeats", "2",
    ]  # fmt: skip
    with LoopbackServer(build_openai_app(gold, "policy")) as backend:
        first = CliRunner().invoke(app, [*args, "--backend", f"{backend.url}/v1"])
        again = CliRunner().invoke(app, [*args, "--backend", f"{backend.url}/v1"])
    assert first.exit_code == 0, first.output
    assert "6 collected, 0 already on disk" in first.output
    assert "0 collected, 6 already on disk" in again.output
    rows = read_rollouts(Path(out))
    assert rows.height == 6 and rows["reward"].to_list() == [1.0] * 6
    assert set(rows["policy"]) == {f"proxy:{backend.url}/v1"}
