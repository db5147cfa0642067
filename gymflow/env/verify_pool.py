"""Run CPU-heavy verifiers in worker processes, off the server's event loop.

An environment with ``heavy_verify = True`` (math-verify, running untrusted code) would stall
every other session for the length of one verification if it ran on the event loop, and a
thread does not help with CPU-bound Python (the GIL). The server hands such calls to a
``ProcessPoolExecutor``. Workers are *spawned* (not forked): the parent may hold torch or
uvicorn threads, and forking a threaded process can deadlock. A worker builds the environment
once from its class (module + qualified name, so the class must be importable and build
with no arguments) and reuses it; task and items travel as JSON-able data.

Light verifiers (a dict comparison) run inline: a process hop costs more than they do.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from gymflow.core.failures import FailureKind
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.env.sessions import RequestError

_WORKER_ENVS: dict[tuple[str, str], Environment] = {}


def _verify_in_worker(env_class: tuple[str, str], task: dict, items: list[dict]) -> dict:
    env = _WORKER_ENVS.get(env_class)
    if env is None:
        module, qualname = env_class
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        env = _WORKER_ENVS[env_class] = cls()
    return env.verify(Task.model_validate(task), items).to_dict()


class VerifyPool:
    """Verification for one environment: inline, or in a lazily started process pool."""

    def __init__(
        self, env: Environment, workers: int | None = None, timeout_s: float = 60.0
    ) -> None:
        self.env, self.timeout_s = env, timeout_s
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None

    @property
    def in_processes(self) -> bool:
        return bool(getattr(self.env, "heavy_verify", False))

    async def verify(self, task: Task, items: list[dict]) -> dict:
        if not self.in_processes:
            return self.env.verify(task, items).to_dict()
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(
            self._executor(),
            _verify_in_worker,
            (type(self.env).__module__, type(self.env).__qualname__),
            task.model_dump(),
            items,
        )
        try:
            return await asyncio.wait_for(call, self.timeout_s)
        except TimeoutError:
            # The worker is stuck in the verifier: kill the pool so it cannot hold a CPU (and
            # the next call) forever; the next verification starts a fresh one.
            self.shutdown(kill=True)
            raise RequestError(
                504,
                FailureKind.VERIFY_TIMEOUT,
                f"the {self.env.name} verifier took over {self.timeout_s:g} s; "
                "the episode is recorded without a verdict",
            ) from None
        except BrokenProcessPool:
            # A worker died (killed, out of memory): drop the pool so the next call starts a
            # fresh one, and tell this caller plainly instead of scoring the trajectory 0.
            self.shutdown()
            raise RequestError(
                503, FailureKind.ENV_UNAVAILABLE, "a verifier worker process died; retry"
            ) from None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        return self._pool

    def shutdown(self, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
