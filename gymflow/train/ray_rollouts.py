"""GRPO's rollout rounds on Ray rollout workers (``grpo.rollout: {"engine": "ray"}``).

:class:`RayRollouts` is what :class:`~gymflow.train.grpo.RolloutSource` hands a round's planned
episodes to when the settings say ``engine: "ray"``. It starts ``workers`` rollout workers
(:class:`~gymflow.rollout.ray_engine.RayWorkers`: Ray actors, each a transformers copy of the
policy loaded from the checkpoint GRPO started from, and an in-process client of the
environment) on the cluster at ``address``, or on a local cluster it starts at the first step
and stops in :meth:`close`.

Before each step's rollouts, :meth:`synced` sends the trainer's current weights to every worker
through Ray's object store (:meth:`RayWorkers.sync_weights`, one copy whatever the number of
workers) and checks each worker's digest of the weights it then holds against the trainer's:
a batch is never sampled from other weights (a worker Ray restarts loads them again before its
next shard). :meth:`run` cuts a round into one shard per worker, every episode of a shard live
at once (as the local engine keeps every episode of a round live), and hands each finished
episode back as it ends. The source builds and stores the rows as it does for its own
episodes: the same plan (ids, seeds), lineage, part files and Parquet schema.

Not covered: LoRA (the trainer's weights are an adapter's, not a model's), which the settings
refuse with ``engine: "ray"`` (vLLM is another engine); a mix of
environments (a worker holds one environment's client), which :meth:`run` refuses.
"""

from __future__ import annotations

import contextlib
import math
import os
import time

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.ray_cluster import LOCAL_OBJECT_STORE_MB, ray_cluster
from gymflow.env.environment import Environment
from gymflow.rollout.driver import OnDone
from gymflow.rollout.engine import CollectSettings
from gymflow.rollout.episode import Sampling
from gymflow.rollout.ray_engine import RayWorkers
from gymflow.rollout.ray_worker import weights_digest
from gymflow.rollout.store import Planned

MAX_LIVE = 1 << 16
"""A worker's window: larger than any shard, so every episode of a shard is live at once."""


class RayRollouts:
    """``workers`` Ray rollout workers for one GRPO run, started at the first :meth:`synced`."""

    def __init__(
        self, env: Environment, sampling: Sampling, workers: int, address: str | None = None
    ) -> None:
        self.env, self.sampling, self.address = env, sampling, address
        self.n_workers = workers
        self.workers: RayWorkers | None = None
        self.syncs: list[dict] = []
        """Each sync: the trainer's step, its weights' digest, each worker's, seconds taken."""
        self._stack = contextlib.ExitStack()

    def synced(self, trainer) -> RayRollouts:
        """The workers, holding ``trainer``'s current weights (started on the first call)."""
        model = trainer.model
        if hasattr(model, "peft_config"):
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                "rollout engine 'ray' cannot roll out a LoRA adapter: train without lora, or use "
                "engine 'local'",
            )
        started = time.perf_counter()
        weights = model.state_dict()
        if self.workers is None:
            self._start(str(model.name_or_path), weights)
        assert self.workers is not None
        held = self.workers.sync_weights(weights)
        want = weights_digest(weights)
        stale = [k for k, digest in enumerate(held) if digest and digest != want]
        if stale:  # a worker model that is not the trainer's (another architecture, a bug)
            raise GymflowError(
                FailureKind.INTERNAL_ERROR,
                f"Ray rollout workers {stale} hold other weights than the trainer after a sync",
            )
        self.syncs.append(
            {
                "step": trainer.state.global_step,
                "trainer": want,
                "workers": held,
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
        return self

    async def run(self, planned: list[Planned], on_done: OnDone) -> None:
        """Run a round's episodes on the workers, one shard each; ``on_done`` per episode."""
        others = sorted({p.task.env for p in planned} - {self.env.name})
        if others:  # each worker holds one environment's client
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"rollout engine 'ray' runs one environment ({self.env.name}), not {others}: train "
                "a mix of environments with engine 'local'",
            )
        if self.workers is None:
            raise RuntimeError("RayRollouts.run before synced(): the workers hold no weights")
        self.workers.shard_size = max(1, math.ceil(len(planned) / len(self.workers.actors)))
        await self.workers(planned, on_done)

    def summary(self) -> dict:
        """The workers' summary (restarts, shards ...) and the weight syncs' seconds."""
        summary = self.workers.summary() if self.workers is not None else {"name": "ray"}
        return summary | {"sync_s": [s["seconds"] for s in self.syncs]}

    def close(self) -> None:
        """Stop the workers (and the local cluster, if one was started here)."""
        self._stack.close()
        self.workers = None

    def _start(self, model_path: str, weights: dict) -> None:
        size_mb = sum(t.numel() * t.element_size() for t in weights.values()) >> 20
        cluster = self._stack.enter_context(
            ray_cluster(
                self.address,
                num_cpus=max(self.n_workers, os.cpu_count() or 1),
                # the weights pass through the store once per step: room for two copies
                object_store_mb=max(LOCAL_OBJECT_STORE_MB, 2 * size_mb + 64),
            )
        )
        settings = CollectSettings(
            run_id="grpo",  # the rows are built by the source, with its lineage
            policy_spec=f"transformers:{model_path}",
            concurrency=MAX_LIVE,
            sampling=self.sampling,
            progress=False,
        )
        self.workers = self._stack.enter_context(
            RayWorkers(self.env, [], settings, self.n_workers, start_s=cluster.start_s)
        )
