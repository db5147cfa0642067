"""``gymflow policy serve --policy scripted:ENV``: the environment's gold answers behind the
OpenAI API, from its example tasks or from ``--tasks``, so an agent program gets a successful
episode before any training."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
from ports import free_port  # tests/ is on the path

from gymflow.data.task_files import load_tasks
from gymflow.env.registry import get_env

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
EXAMPLES = Path(__file__).resolve().parents[1] / "environments/tool_call/examples/tasks.jsonl"


def _serve(*extra: str):
    port = free_port()
    proc = subprocess.Popen(
        [GYMFLOW, "policy", "serve", "--policy", "scripted:tool_call", "--port", str(port),
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the policy server did not start"
        try:
            httpx.get(f"{url}/models", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)


def _ask(url: str, task) -> dict:
    body = {"model": "tool_call", "messages": task.prompt, "tools": task.tools}
    reply = httpx.post(f"{url}/chat/completions", json=body, timeout=30).json()
    return reply["choices"][0]["message"]


def test_the_examples_are_answered_with_their_gold_calls(tmp_path):
    env = get_env("tool_call")
    tasks = list(load_tasks(env, EXAMPLES).values())
    mine = tmp_path / "mine.jsonl"  # a task file of one's own: its second task only
    mine.write_text(tasks[1].model_dump_json() + "\n")
    for extra, task in (((), tasks[0]), (("--tasks", str(mine)), tasks[1])):
        proc, url = _serve(*extra)
        try:
            message = _ask(url, task)
        finally:
            proc.terminate()
            proc.wait(15)
        (call,) = message["tool_calls"]
        gold = json.loads(env.gold_text(task).removeprefix("<tool_call>").removesuffix(
            "</tool_call>"))  # fmt: skip
        assert call["function"]["name"] == gold["name"]
        assert json.loads(call["function"]["arguments"]) == gold["arguments"]


def test_tasks_for_another_backend_are_refused():
    done = subprocess.run(
        [GYMFLOW, "policy", "serve", "--policy", "transformers:/nowhere", "--tasks", "t.jsonl"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: [bad_request]")
