"""A collection's episodes as mapped Prefect tasks: one task run per shard of the plan.

:class:`PrefectShards` is an :class:`~gymflow.rollout.engine.EpisodeRunner` for the collect
flow (``flows/collect.py``, ``shards`` > 0): the engine plans the collection and skips what is
on disk as always; the rest is cut into ``shards`` shards, each submitted to a Prefect task
runner as a :func:`run_rollout_shard` task run (threads in the flow's process, or prefect-ray's
``RayTaskRunner``: a Ray task each, on any node of the cluster). A shard task loads the policy
from the collection's spec, builds its env client and runs the one episode driver over its
shard (a :class:`~gymflow.rollout.ray_worker.RolloutWorker` used once); its finished episodes
come back as the task's result and the flow's process builds and writes every row through the
one store, so the run folder, parts and lineage are the same as for any other collection.

A shard is all or nothing: a shard task that fails (after its Prefect retry) writes none of its
rows, the other shards' rows are written, and the collection fails with
``backend_unavailable``; running the flow again collects what is missing. Each shard loads the
policy once: this suits API-served policies (``openai:``) and scripted ones; a transformers
policy on many nodes is better served by Ray rollout workers (``engine: ray``), which keep it
loaded across shards and take a trainer's weights.
"""

from __future__ import annotations

import asyncio
import math
import os

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.environment import Environment
from gymflow.rollout.driver import OnDone
from gymflow.rollout.engine import CollectSettings
from gymflow.rollout.ray_worker import Done, RolloutWorker
from gymflow.rollout.store import Planned


@task(name="run_rollout_shard", retries=1, cache_policy=NO_CACHE, persist_result=False)
def run_rollout_shard(
    env: Environment, settings: CollectSettings, shard: list[Planned], env_url: str | None = None
) -> tuple[list[Done], list[int], int]:
    """Run ``shard``'s episodes; they, the generation batch sizes, and this process's id."""
    worker = RolloutWorker(env, settings, [p.task for p in shard], env_url)

    async def go() -> tuple[list[Done], list[int]]:
        done: list[Done] = []
        sizes: list[int] = []
        try:
            async for finished, batches in worker.run(shard):
                done += finished
                sizes += batches
        finally:
            await worker.aclose()
        return done, sizes

    return (*asyncio.run(go()), os.getpid())


class PrefectShards:
    """Runs a collection's episodes as ``shards`` task runs on ``task_runner`` (entered)."""

    def __init__(
        self,
        task_runner: TaskRunner,
        env: Environment,
        settings: CollectSettings,
        shards: int,
        env_url: str | None = None,
    ) -> None:
        if shards < 1:
            raise GymflowError(FailureKind.BAD_REQUEST, f"shards must be >= 1, got {shards}")
        self.task_runner, self.env, self.settings = task_runner, env, settings
        self.shards, self.env_url = shards, env_url
        self.submitted = 0
        self.processes: set[int] = set()
        """The process ids the shards ran in (the flow's own, for the thread runner)."""

    async def __call__(self, todo: list[Planned], on_done: OnDone) -> list[int]:
        if not todo:
            return []
        size = math.ceil(len(todo) / self.shards)
        futures = [
            self.task_runner.submit(
                run_rollout_shard,
                {"env": self.env, "settings": self.settings, "shard": todo[i : i + size]}
                | {"env_url": self.env_url},
            )
            for i in range(0, len(todo), size)
        ]
        self.submitted += len(futures)
        sizes: list[int] = []
        failed: list[BaseException] = []
        # Waiting blocks this event loop, which serves nothing else while the shards run.
        for future in as_completed(futures):
            try:
                done, batches, pid = future.result()
            except Exception as exc:  # written: the other shards; not: this one
                failed.append(exc)
                continue
            self.processes.add(pid)
            for p, episode, error in done:
                on_done(p, episode, error)
            sizes += batches
        if failed:
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"{len(failed)} of {len(futures)} rollout shards failed ({failed[0]}); the "
                "others are written: run the collection again to resume",
            )
        return sizes

    def summary(self) -> dict:
        return {
            "name": "prefect",
            "task_runner": type(self.task_runner).__name__,
            "shards": self.submitted,
            "processes": sorted(self.processes),
        }
