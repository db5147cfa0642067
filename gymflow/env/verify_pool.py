"""Run CPU-heavy verifiers in worker processes, off the server's event loop.

An environment with ``heavy_verify = True`` (math-verify, running untrusted code) would stall
every other session for the length of one verification if it ran on the event loop, and a
thread does not help with CPU-bound Python (the GIL). The server hands such calls to a
``ProcessPoolExecutor``. Workers are *spawned* (not forked): the parent may hold torch or
uvicorn threads, and forking a threaded process can deadlock. A worker builds the environment
once from its class (module + qualified name, so the class must be importable and build
with no arguments) and reuses it; task and items travel as JSON-able data.

Light verifiers (a dict comparison) run inline: a process hop costs more than they do.
:class:`~gymflow.env.ray_verify.RayVerifyPool` keeps this contract with Ray actors as workers
(``verify_on="ray"``); both build the environment in the worker with :func:`worker_env`.
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


def default_workers() -> int:
    """Verify workers of one server when none are asked for: the machine's cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def class_of(env: Environment) -> tuple[str, str]:
    """What a worker needs to build ``env`` again: its class's module and qualified name."""
    return type(env).__module__, type(env).__qualname__


def worker_env(env_class: tuple[str, str]) -> Environment:
    """The environment of ``env_class`` in this worker process, built on first use."""
    env = _WORKER_ENVS.get(env_class)
    if env is None:
        module, qualname = env_class
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        env = _WORKER_ENVS[env_class] = cls()
    return env


def _verify_in_worker(env_class: tuple[str, str], task: dict, items: list[dict]) -> dict:
    return worker_env(env_class).verify(Task.model_validate(task), items).to_dict()


def timeout_error(env: Environment, timeout_s: float) -> RequestError:
    """A verification that ran past ``timeout_s``: 504 ``verify_timeout``, no verdict."""
    return RequestError(
        504,
        FailureKind.VERIFY_TIMEOUT,
        f"the {env.name} verifier took over {timeout_s:g} s; "
        "the episode is recorded without a verdict",
    )


def worker_died_error(detail: str = "a verifier worker process died; retry") -> RequestError:
    """A worker gone mid-verification: 503 ``env_unavailable`` (retryable), never a reward 0."""
    return RequestError(503, FailureKind.ENV_UNAVAILABLE, detail)


class VerifyPool:
    """Verification for one environment: inline, or in a lazily started process pool."""

    def __init__(
        self, env: Environment, workers: int | None = None, timeout_s: float = 60.0
    ) -> None:
        self.env, self.timeout_s = env, timeout_s
        self.workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None

    @property
    def in_processes(self) -> bool:
        return bool(getattr(self.env, "heavy_verify", False))

    async def verify(self, task: Task, items: list[dict]) -> dict:
        if not self.in_processes:
            return self.env.verify(task, items).to_dict()
        return await self._verify_in_workers(task, items)

    async def _verify_in_workers(self, task: Task, items: list[dict]) -> dict:
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(
            self._executor(), _verify_in_worker, class_of(self.env), task.model_dump(), items
        )
        try:
            return await asyncio.wait_for(call, self.timeout_s)
        except TimeoutError:
            # The worker is stuck in the verifier: kill the pool so it cannot hold a CPU (and
            # the next call) forever; the next verification starts a fresh one.
            self.shutdown(kill=True)
            raise timeout_error(self.env, self.timeout_s) from None
        except BrokenProcessPool:
            # A worker died (killed, out of memory): drop the pool so the next call starts a
            # fresh one, and tell this caller plainly instead of scoring the trajectory 0.
            self.shutdown()
            raise worker_died_error() from None

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
