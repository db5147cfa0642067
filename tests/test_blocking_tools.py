"""A sync tool declared blocking runs in a worker thread: the server answers others meanwhile.

The blocking tool waits on a threading.Event that only another request (``release``) sets. On
the event loop it would hold the loop, ``release`` could not be served and the wait would time
out; declared in ``blocking_tools`` it runs in a thread and ``release`` gets through.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from gymflow.core.scoring import Score
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, TaskDraft
from gymflow.env.resources_server import build_app

GATE_TIMEOUT_S = 2.0


class GateEnv(Environment):
    name = "gate"
    blocking_tools = frozenset({"wait_for_release"})

    def __init__(self) -> None:
        self.gate = threading.Event()

    def tools(self):
        def wait_for_release() -> str:
            """Block until another session calls release."""
            return "released" if self.gate.wait(GATE_TIMEOUT_S) else "timed out"

        def release() -> str:
            """Open the gate."""
            self.gate.set()
            return "opened"

        return [wait_for_release, release]

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return [TaskDraft([{"role": "user", "content": f"t{i}"}], {}, seed) for i in range(n)]

    def verify(self, task, items) -> Score:
        return Score(reward=0.0, success=False)

    def gold_text(self, task) -> str:
        return ""


class OnTheLoop(GateEnv):
    name = "gate_on_loop"
    blocking_tools = frozenset()


async def _waiter_and_releaser(env: Environment) -> str:
    tasks = build_tasks(env, 2, seed=1, heldout_frac=0.0, val_frac=0.0)
    async with EnvClient(app=build_app(env)) as client:
        a, b = [await client.seed_session(t) for t in tasks]

        async def release_soon():
            await asyncio.sleep(0.05)  # let the wait start first
            return await client.call_tool(b, "release", {})

        waited, _ = await asyncio.gather(
            client.call_tool(a, "wait_for_release", {}), release_soon()
        )
        return waited["output"]


def test_a_declared_blocking_tool_leaves_the_server_free():
    assert asyncio.run(_waiter_and_releaser(GateEnv())) == "released"


def test_undeclared_it_holds_the_event_loop():
    # the same tool on the event loop: release is served only after the wait timed out
    assert asyncio.run(_waiter_and_releaser(OnTheLoop())) == "timed out"


def test_blocking_tools_must_name_tools():
    class Typo(GateEnv):
        name = "typo"
        blocking_tools = frozenset({"wait_for_relase"})

    with pytest.raises(ValueError, match="wait_for_relase"):
        build_app(Typo())
