"""Rollout workers on Ray: a collection's episodes run in Ray actors, its rows are written here.

:class:`RayWorkers` is the engine's :class:`~gymflow.rollout.engine.EpisodeRunner` for Ray. The
engine plans the collection, skips what is on disk and hands the rest over; they are cut into
shards, and each free worker takes the next one. A worker (one Ray actor,
:class:`~gymflow.rollout.ray_worker.RolloutWorker`) holds a policy backend loaded from the
collection's policy spec and a client of the environment (the env in-process in the actor, or
the server at ``env_url``), and runs the one episode driver
(:func:`~gymflow.rollout.driver.run_window`, a window of ``concurrency`` episodes) over its
shard, streaming each finished episode back as it ends. Rows are built and written in the
collecting process through the one store (:class:`~gymflow.rollout.store.RolloutWriter`): one
writer per folder, the same lineage and part files, so resume, ``--retry-failed``, export and
every reader work unchanged, and workers on other machines need no shared filesystem.

Faults: a worker whose process dies mid-shard (killed, out of memory, its node lost) is
restarted by Ray (``max_restarts`` times); the rollouts of its shard that had not come back go
to the front of the queue, for the next free worker; those that came back were written once.
So a dead worker loses no rollout and duplicates none. When no worker is left, the collection
fails with ``backend_unavailable`` after writing every row that came back, and running it again
resumes. An episode's ``GymflowError`` is a failure row, as in the local engine; any other
exception in a worker (a bug) stops the collection.

Weights: :meth:`RayWorkers.sync_weights` puts a trainer's state dict in Ray's object store once
and loads it into every worker's model (transformers backends) before the next rollout batch;
every shard names the weights it must be sampled with, so a worker Ray restarted (holding the
spec's weights again) loads them first: no batch is sampled from stale weights. (A vLLM server
is synced by TRL itself; point the workers at it with ``openai:``.)
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.ray_cluster import ray_cluster, require_ray
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.rollout.driver import OnDone
from gymflow.rollout.engine import CollectReport, CollectSettings, collect
from gymflow.rollout.ray_worker import RolloutWorker
from gymflow.rollout.store import Planned

SHARDS_PER_WORKER = 4
"""Default shards per worker: enough that a fast worker takes a slow one's share."""

RESTART_WAIT_S = 120.0
"""Longest wait for Ray to restart a dead worker (a policy to load again) before giving it up."""


class RayWorkers:
    """``workers`` rollout workers on the connected Ray cluster, for one collection.

    Use as a context manager (the actors are killed on exit). ``shard_size``: rollouts per
    shard (default: the work cut into ``SHARDS_PER_WORKER`` shards per worker, at least
    ``concurrency`` each). ``worker_cpus``: the Ray CPUs each actor asks for.
    """

    def __init__(
        self,
        env: Environment,
        tasks: list[Task],
        settings: CollectSettings,
        workers: int,
        env_url: str | None = None,
        shard_size: int | None = None,
        max_restarts: int = 2,
        worker_cpus: float = 1.0,
        start_s: float = 0.0,
    ) -> None:
        ray = require_ray()
        if workers < 1:
            raise GymflowError(
                FailureKind.BAD_REQUEST, f"--ray-workers must be >= 1, got {workers}"
            )
        self.settings, self.shard_size, self.max_restarts = settings, shard_size, max_restarts
        actor = ray.remote(RolloutWorker).options(
            max_restarts=max_restarts,
            num_cpus=worker_cpus,
            runtime_env={"env_vars": _secrets(settings.policy_spec)},
        )
        self.actors = [actor.remote(env, settings, tasks, env_url) for _ in range(workers)]
        self.restarts = self.requeued = self.shards = self.weight_syncs = 0
        self._weights: tuple | None = None  # (version, object ref) of the last weights sent
        self._gone: set[int] = set()  # died more often than Ray restarts them
        self.cluster_start_s, self.workers_start_s = start_s, 0.0
        started = time.perf_counter()
        try:  # every worker up (its policy and env client loaded), or why it is not
            self._pids = ray.get([a.ready.remote() for a in self.actors])
        except ray.exceptions.RayActorError as exc:
            raise _start_failure(exc) from None
        self.workers_start_s = round(time.perf_counter() - started, 2)

    def __enter__(self) -> RayWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        ray = require_ray()
        for actor in self.actors:
            ray.kill(actor)

    def pids(self) -> list[int]:
        """Each worker's process id; a worker that failed to start raises its reason."""
        ray = require_ray()
        try:
            return ray.get([a.pid.remote() for a in self.actors])
        except ray.exceptions.RayActorError as exc:
            raise _start_failure(exc) from None

    async def _back(self, k: int) -> bool:
        """Wait while Ray restarts worker ``k`` (calls to it fail meanwhile); False if Ray will
        not (it died more than ``max_restarts`` times). Counts a restart by its new process."""
        ray = require_ray()
        deadline = time.monotonic() + RESTART_WAIT_S
        while time.monotonic() < deadline:
            try:
                pid = await self.actors[k].pid.remote()
            except ray.exceptions.ActorUnavailableError:  # restarting
                await asyncio.sleep(0.2)
                continue
            except ray.exceptions.RayActorError:
                return False
            if pid != self._pids[k]:
                self._pids[k] = pid
                self.restarts += 1
            return True
        return False

    def sync_weights(self, weights: dict) -> list[str]:
        """Send a trainer's state dict to every worker (once through the object store, not once
        per worker); each worker's digest of the weights it then holds ("" for one that died
        meanwhile). Kept for workers Ray restarts: they load it again before their next shard."""
        ray = require_ray()
        self.weight_syncs += 1
        ref = ray.put({k: v.detach().cpu() for k, v in weights.items()})
        self._weights = (self.weight_syncs, ref)
        digests = []
        for actor in self.actors:
            try:
                digests.append(ray.get(actor.load_weights.remote(ref, self.weight_syncs)))
            except ray.exceptions.RayActorError:  # dying: it loads them before its next shard
                digests.append("")
        return digests

    def collect(
        self, env: Environment, tasks: list[Task], out_dir: Path, env_url: str | None = None
    ) -> CollectReport:
        """:func:`~gymflow.rollout.engine.collect` on these workers (the policy lives in them:
        this process loads none).

        Parts hold as many rows as are live across the workers (as the local engine's hold
        one window): validating and writing a part costs ~20 ms however small. With one
        worker's window per part (16 rows) this process spent 3.1-3.4 ms of CPU per rollout of
        a 50 ms-tool environment, more than twice the workers' 1.2-1.3 ms together; with 2
        workers' windows (32 rows) it spends 1.9 ms, with 4 workers' 1.1 ms
        (benchmarks/scale.py). A kill re-collects at most that many rows.
        """
        rows_live = replace(self.settings, concurrency=self.settings.concurrency * len(self.actors))
        return collect(env, None, tasks, out_dir, rows_live, env_url=env_url, runner=self)

    def summary(self) -> dict:
        return {
            "name": "ray",
            "workers": len(self.actors),
            "shards": self.shards,
            "worker_restarts": self.restarts,
            "weight_syncs": self.weight_syncs,
            "rollouts_run_again": self.requeued,
            "cluster_start_s": self.cluster_start_s,
            "workers_start_s": self.workers_start_s,
        }

    async def __call__(self, todo: list[Planned], on_done: OnDone) -> list[int]:
        """Run ``todo`` on the workers; ``on_done`` here for each rollout, exactly once."""
        ray = require_ray()
        size = self.shard_size or max(
            self.settings.concurrency, math.ceil(len(todo) / (len(self.actors) * SHARDS_PER_WORKER))
        )
        queue = deque(todo[i : i + size] for i in range(0, len(todo), size))
        self.shards += len(queue)
        batches: list[int] = []
        delivered: set[str] = set()  # exactly once, even if a worker thought lost answers late

        async def serve(k: int) -> None:
            actor = self.actors[k]
            while queue and k not in self._gone:
                shard, came_back = queue.popleft(), set()
                try:
                    # the weights ride along as a nested ref: fetched only by a worker that
                    # Ray restarted since they were synced (it holds the spec's)
                    stream = actor.run.options(num_returns="streaming").remote(shard, self._weights)
                    async for ref in stream:
                        done, sizes = await ref
                        for p, episode, error in done:
                            came_back.add(p.rollout_id)
                            if p.rollout_id not in delivered:
                                delivered.add(p.rollout_id)
                                on_done(p, episode, error)
                        batches.extend(sizes)
                except ray.exceptions.RayActorError:
                    rest = [p for p in shard if p.rollout_id not in came_back]
                    if rest:
                        queue.appendleft(rest)  # the next free worker runs them
                        self.requeued += len(rest)
                    if not await self._back(k):  # Ray gave up on it: it is gone
                        self._gone.add(k)

        serving = [asyncio.ensure_future(serve(k)) for k in range(len(self.actors))]
        try:  # a bug in one worker stops them all, as one in the local window does
            await asyncio.wait(serving, return_when=asyncio.FIRST_EXCEPTION)
            for task in serving:
                if task.done() and task.exception() is not None:
                    raise task.exception()
        finally:
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)
        if queue:
            left = sum(len(shard) for shard in queue)
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"every Ray rollout worker died ({left} rollouts not run; those that finished "
                "are written): run the collection again to resume",
            )
        if len(delivered) != len(todo):  # a bug here, not a fault out there
            raise GymflowError(
                FailureKind.INTERNAL_ERROR,
                f"Ray workers returned {len(delivered)} of {len(todo)} rollouts",
            )
        return batches


def _secrets(policy_spec: str) -> dict[str, str]:
    """The variables a worker reads its bearer tokens from (env server, policy server), as set
    here: a worker on another node does not inherit this process's environment."""
    from gymflow.env.client import TOKEN_ENV
    from gymflow.policy.spec import KEY_VARIABLES, parse_spec

    names = [TOKEN_ENV, *KEY_VARIABLES]
    if policy_spec:
        names.append(parse_spec(policy_spec).options.get("api_key_env", ""))
    return {name: os.environ[name] for name in names if name and os.environ.get(name)}


def _start_failure(exc: Exception) -> GymflowError:
    """A worker's start-up error as the ``GymflowError`` it raised (a bad policy spec ...)."""
    cause = getattr(exc, "cause", None) or exc.__cause__
    while cause is not None and not isinstance(cause, GymflowError):
        cause = getattr(cause, "cause", None) or cause.__cause__
    if cause is not None:
        return cause
    return GymflowError(
        FailureKind.BACKEND_UNAVAILABLE, f"a Ray rollout worker did not start: {exc}"
    )


def collect_on_ray(
    env: Environment,
    tasks: list[Task],
    out_dir: Path,
    settings: CollectSettings,
    workers: int,
    address: str | None = None,
    env_url: str | None = None,
) -> CollectReport:
    """:func:`~gymflow.rollout.engine.collect` with ``workers`` Ray workers, on the cluster at
    ``address`` or on a local one started and stopped here (as many CPUs as workers, at least
    the machine's)."""
    cpus = max(workers, os.cpu_count() or 1)
    with (
        ray_cluster(address, num_cpus=cpus) as cluster,
        RayWorkers(env, tasks, settings, workers, env_url, start_s=cluster.start_s) as runner,
    ):
        return runner.collect(env, tasks, out_dir, env_url)
