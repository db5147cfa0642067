"""External agents — code written in any framework — driven through the capturing proxy.

An agent program is a Python callable named ``path/to/file.py:function`` or
``package.module:function`` and called in a thread, once per rollout, with keyword arguments
only::

    function(prompt=[chat messages], tools=[OpenAI tool schemas], base_url="<proxy>/episodes/<id>/v1",
             api_key="...", tool_url="<proxy>/episodes/<id>/tools", **options)

It builds its client on ``base_url`` as it would on any OpenAI-compatible server and may run its
tools through ``tool_url`` (``POST {tool_url}/{name}`` with the JSON arguments); what it returns
is ignored — the environment judges the trajectory the proxy recorded. The worked examples are
``examples/agents/langgraph_agent.py`` and ``examples/agents/openai_agents_sdk_agent.py``.

:class:`ExternalAgents` is an :class:`~gymflow.rollout.engine.EpisodeRunner`: for each planned
rollout it opens an episode at the proxy with the rollout's seed, runs the next program
(round-robin), ends the episode and hands the proxy's answer to ``on_done``
(:func:`gymflow.agent.wire.episode_of`), so the one store builds the row. A program that raises
still ends its episode: what the model did before is judged (a model's mistake that crashed the
agent is still the model's mistake); one that made no model call is a rollout without a reward
(``agent_unavailable``, with the exception in the detail).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gymflow.agent.client import AgentClient
from gymflow.agent.wire import episode_of
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.rollout.driver import OnDone
from gymflow.rollout.store import Planned

REPO = Path(__file__).resolve().parents[2]


def load_program(ref: str) -> Callable:
    """The callable ``ref`` names (``file.py:function`` — relative to the working folder or the
    repository — or ``module:function``); ``GymflowError(BAD_CONFIG)`` saying why not."""
    where, sep, name = ref.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise GymflowError(
            FailureKind.BAD_CONFIG, f"agent {ref!r}: write FILE.py:FUNCTION or MODULE:FUNCTION"
        )
    try:
        if where.endswith(".py"):
            path = next((p for p in (Path(where), REPO / where) if p.is_file()), None)
            if path is None:
                raise FileNotFoundError(f"no file {where}")
            module_name = f"gymflow_agent_{path.stem}"
            module = sys.modules.get(module_name)
            if module is None or getattr(module, "__file__", None) != str(path.resolve()):
                spec = importlib.util.spec_from_file_location(module_name, path.resolve())
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        program = getattr(module, name)
    except Exception as exc:  # a missing file, an import error, no such function
        raise GymflowError(
            FailureKind.BAD_CONFIG, f"agent {ref!r} does not load: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(program):
        raise GymflowError(FailureKind.BAD_CONFIG, f"agent {ref!r} is not callable")
    return program


class ExternalAgents:
    """Planned rollouts run by external agent programs through a capturing proxy."""

    def __init__(
        self,
        programs: list[str],
        proxy_url: str = "",
        token: str | None = None,
        options: dict | None = None,
        concurrency: int = 8,
        timeout_s: float = 300.0,
    ) -> None:
        if not programs:
            raise GymflowError(FailureKind.BAD_CONFIG, "no agent programs given")
        self.refs = list(programs)
        self.programs = [load_program(ref) for ref in self.refs]
        self.proxy_url, self.token = proxy_url.rstrip("/"), token
        self.options, self.concurrency, self.timeout_s = dict(options or {}), concurrency, timeout_s
        self.threads: ThreadPoolExecutor | None = None
        self.crashes: dict[str, int] = {}
        """Exceptions raised by the programs, by type name (for the report)."""

    def close(self) -> None:
        """Let the program threads go (a later call starts new ones)."""
        if self.threads is not None:
            self.threads.shutdown(wait=False, cancel_futures=True)
            self.threads = None

    async def __call__(self, todo: list[Planned], on_done: OnDone) -> list[int]:
        if not self.proxy_url:
            raise ValueError("no proxy URL to run the agents against")
        if self.threads is None:
            self.threads = ThreadPoolExecutor(self.concurrency, thread_name_prefix="agent")
        gate = asyncio.Semaphore(self.concurrency)
        async with AgentClient(self.proxy_url, self.token, self.timeout_s, retries=2) as proxy:

            async def one(k: int, p: Planned) -> None:
                async with gate:
                    try:
                        answer = await self._episode(proxy, k % len(self.programs), p)
                    except GymflowError as exc:
                        on_done(p, None, exc)
                        return
                on_done(p, *episode_of(p.task, p.seed, answer))

            await asyncio.gather(*(one(k, p) for k, p in enumerate(todo)))
        return []

    async def _episode(self, proxy: AgentClient, which: int, p: Planned) -> dict:
        opened = await proxy.post("/episodes", {"task": p.task.model_dump(), "seed": p.seed})
        eid = opened["episode_id"]
        kwargs = {
            **self.options,
            "prompt": [dict(m) for m in p.task.prompt],
            "tools": [dict(t) for t in p.task.tools],
            "base_url": opened["base_url"],
            "api_key": self.token or "none",
            "tool_url": opened["tools_url"],
        }
        loop = asyncio.get_running_loop()
        crash = None
        try:
            await asyncio.wait_for(
                loop.run_in_executor(self.threads, lambda: self.programs[which](**kwargs)),
                self.timeout_s,
            )
        except Exception as exc:  # the program's own failure (or its timeout): judged below
            crash = f"{self.refs[which]} raised {type(exc).__name__}: {exc}"
            self.crashes[type(exc).__name__] = self.crashes.get(type(exc).__name__, 0) + 1
        answer = await proxy.post(f"/episodes/{eid}/end", {})
        if crash and answer.get("error"):
            answer["error"]["message"] += f" ({crash})"
        return answer

    def summary(self) -> dict:
        return {"name": "external", "programs": self.refs, "crashes": dict(self.crashes)}
