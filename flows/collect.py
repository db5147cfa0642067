"""Stand-alone rollout collection: one environment, one task file, one policy → Parquet.

Deploy or schedule it like the lifecycle (``collect.serve(cron=...)``, parameters
``{"options": {...}}``); re-running it with the same ``out`` (or ``run_id``) resumes the
collection instead of starting over, and with ``retry_failed`` runs again the rollouts an env or
policy fault left without a reward. With ``engine: ray`` the episodes run on Ray workers (on
``ray_address``, or a local cluster the task starts and stops; in a process already connected to
Ray, that cluster); the rows land in ``out`` the same way.

With ``shards`` > 0 the episodes run as that many mapped Prefect task runs
(``run_rollout_shard``, :mod:`gymflow.tasks.rollout_shards`), each a shard of the plan, on the
task runner ``task_runner`` names: ``threads`` (this process) or ``ray`` (prefect-ray's
``RayTaskRunner`` on the cluster at ``ray_address``, or a local one started and stopped here);
this flow writes their rows into ``out`` as any collection's.
"""

from __future__ import annotations

import contextlib
import os
from typing import Literal

from prefect import flow
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.rollout.collection import CollectOptions, run_collect
from gymflow.tasks.collect import collect_rollouts
from gymflow.tasks.rollout_shards import PrefectShards


@flow(name="collect-rollouts")
def collect(
    options: CollectOptions,
    shards: int = 0,
    task_runner: Literal["threads", "ray"] = "threads",
    ray_address: str | None = None,
) -> dict:
    """Collect ``options.num_repeats`` rollouts per task into ``options.out``; the report.

    ``shards``: run the episodes as this many mapped task runs on ``task_runner`` (0: one task
    runs the collection, on ``options.engine``).
    """
    options = options.model_copy(update={"progress": False})
    if not shards:
        return collect_rollouts(options)
    if options.engine != "local":
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            "shards run the episodes as Prefect task runs: give engine 'local' with them (the "
            "task runner says where they run), or no shards for engine 'ray'",
        )
    with _entered(task_runner, ray_address, shards) as runner:
        report = run_collect(
            options, lambda env, settings: PrefectShards(runner, env, settings, shards)
        )
    return report.as_dict()


@contextlib.contextmanager
def _entered(name: str, address: str | None, shards: int):
    """The task runner ``name`` names, started (and a Ray cluster connected to, for ``ray``)."""
    runner: TaskRunner
    if name == "ray":
        from prefect_ray import RayTaskRunner

        from gymflow.core.ray_cluster import ray_cluster

        # ours: the loopback-only local cluster, the address probe and their errors; the
        # runner then uses the connection this process holds
        cpus = max(shards, os.cpu_count() or 1)  # a logical CPU per shard task
        with ray_cluster(address, num_cpus=cpus), _draining(RayTaskRunner)() as runner:
            yield runner
        return
    if address:
        raise GymflowError(FailureKind.BAD_REQUEST, "a Ray address is for task_runner 'ray'")
    with ThreadPoolTaskRunner(max_workers=shards) as runner:
        yield runner


def _draining(runner_class):
    """prefect-ray's ``RayTaskRunner`` whose Ray workers send their queued Prefect events (the
    task run's states) before they hand the task's result back. A task run's states reach the
    API as events from a background thread of the process that ran it; the Ray worker is
    stopped with the local cluster as soon as the flow has its results, and a shard's
    ``Completed`` could be lost with it (seen in a full suite: 2 of 3 shard runs in the API).
    prefect-ray has no hook for it, so its remote entry point is wrapped."""

    class RayTaskRunner(runner_class):  # the same runner, by its name in the collect report
        @staticmethod
        def _run_prefect_task(*args, **kwargs):
            try:
                return runner_class._run_prefect_task(*args, **kwargs)
            finally:
                from prefect.events.worker import EventsWorker

                EventsWorker.drain_all(timeout=30)

    return RayTaskRunner
