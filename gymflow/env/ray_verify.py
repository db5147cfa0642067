"""Heavy verifiers on Ray actors instead of the server's process pool (``verify_on="ray"``).

:class:`RayVerifyPool` keeps :class:`~gymflow.env.verify_pool.VerifyPool`'s contract: light
verifiers run inline; a ``heavy_verify`` environment's calls go to one of ``workers`` Ray actors
(:class:`VerifyActor`, one CPU each), each of which builds the environment once from its
importable class (:func:`~gymflow.env.verify_pool.worker_env`, so the class must be importable
on every node) and verifies with the process pool's own worker function. A call runs on the
actor with the fewest calls in flight. A verification past ``timeout_s`` is ``verify_timeout``
(504) and its actor is killed (a stuck verifier cannot hold a CPU forever) and replaced on the
next call; an actor that dies mid-call (killed, out of memory, its node gone) is
``env_unavailable`` (503, retryable) and replaced the same way: nothing is scored 0 silently.
A verifier that raises raises its own exception here, as it does from the process pool.

The pool joins the Ray cluster at ``address``, or the one this process is connected to (an
``env serve --ray`` replica, ``env serve --verify-on ray`` which starts it before the server),
or starts a loopback-only local one for itself (:mod:`gymflow.core.ray_cluster`), at the first
heavy verification. It helps when one verification costs more than the hop to an actor (~1 ms
here) and the server's machine has fewer free cores than the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading

from gymflow.core.failures import FailureKind
from gymflow.core.ray_cluster import ray_cluster, require_ray
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.env.sessions import RequestError
from gymflow.env.verify_pool import (
    VerifyPool,
    _verify_in_worker,
    class_of,
    timeout_error,
    worker_died_error,
    worker_env,
)


class VerifyActor:
    """One verify worker (run as a Ray actor): the environment built once, then verifications."""

    def __init__(self, env_class: tuple[str, str]) -> None:
        self.env_class = env_class
        worker_env(env_class)  # fail at start-up, not at the first verification

    def pid(self) -> int:
        return os.getpid()

    def verify(self, task: dict, items: list[dict]) -> dict:
        return _verify_in_worker(self.env_class, task, items)


class RayVerifyPool(VerifyPool):
    """Verification for one environment: inline, or on a lazily started set of Ray actors."""

    def __init__(
        self,
        env: Environment,
        workers: int | None = None,
        timeout_s: float = 60.0,
        address: str | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        super().__init__(env, workers, timeout_s)
        self.address, self.start_timeout_s = address, start_timeout_s
        self._actors: list = [None] * self.workers
        self._busy = [0] * self.workers
        self.pids: list[int | None] = [None] * self.workers
        """The process id of each actor (``None`` until it has started)."""
        self._cluster: contextlib.ExitStack | None = None
        self._starting = threading.Lock()

    async def _verify_in_workers(self, task: Task, items: list[dict]) -> dict:
        ray = require_ray()
        if None in self._actors:
            await asyncio.to_thread(self._start)
        k = min(range(self.workers), key=self._busy.__getitem__)
        actor = self._actors[k]
        self._busy[k] += 1
        try:
            ref = actor.verify.remote(task.model_dump(), items)
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
        except TimeoutError:
            self._drop(k, actor)  # kills the process stuck in the verifier
            raise timeout_error(self.env, self.timeout_s) from None
        except ray.exceptions.RayActorError:
            self._drop(k, actor)
            raise worker_died_error(
                f"the Ray actor verifying {self.env.name} died; retry"
            ) from None
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause from None  # the verifier's own error, as the process pool gives it
        finally:
            self._busy[k] -= 1

    def _start(self) -> None:
        """Join (or start) the cluster and start every missing actor; blocks, so off the loop."""
        ray = require_ray()
        with self._starting:
            if self._cluster is None:
                stack = contextlib.ExitStack()
                stack.enter_context(
                    ray_cluster(self.address, num_cpus=max(self.workers, os.cpu_count() or 1))
                )
                self._cluster = stack
            missing = [k for k, a in enumerate(self._actors) if a is None]
            actor = ray.remote(VerifyActor).options(num_cpus=1, max_restarts=0)
            started = {k: actor.remote(class_of(self.env)) for k in missing}
            try:
                pids = ray.get(
                    [a.pid.remote() for a in started.values()], timeout=self.start_timeout_s
                )
            except ray.exceptions.GetTimeoutError:
                for a in started.values():
                    ray.kill(a, no_restart=True)
                raise RequestError(
                    503,
                    FailureKind.ENV_UNAVAILABLE,
                    f"no Ray verify worker for {self.env.name} started in "
                    f"{self.start_timeout_s:g} s: the cluster has no free CPU for it; add CPUs "
                    "or lower verify_workers",
                ) from None
            except ray.exceptions.RayActorError as exc:
                raise RequestError(
                    503,
                    FailureKind.ENV_UNAVAILABLE,
                    f"a Ray verify worker could not build {self.env.name} from "
                    f"{'.'.join(class_of(self.env))} (is it installed on every node?): "
                    f"{str(exc).strip().splitlines()[-1]}",
                ) from None
            for (k, a), pid in zip(started.items(), pids, strict=True):
                self._actors[k], self.pids[k] = a, pid

    def _drop(self, k: int, actor) -> None:
        """Kill actor ``k`` (if it is still the one in its slot); the next call replaces it."""
        if self._actors[k] is actor:
            self._actors[k], self.pids[k] = None, None
            require_ray().kill(actor, no_restart=True)

    def shutdown(self, kill: bool = False) -> None:
        """Kill the actors and leave the cluster (a local one this pool started stops)."""
        for k, actor in enumerate(self._actors):
            if actor is not None:
                self._drop(k, actor)
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
