"""One rollout worker, run as a Ray actor by :mod:`gymflow.rollout.ray_engine` (or for one
shard, in a Prefect task of the collect flow).

It holds a policy backend loaded from the collection's policy spec and one client of the
environment for its life (the env in-process in the worker, or the server at ``env_url``), and
runs the one episode driver (:func:`~gymflow.rollout.driver.run_window`) over the shards it is
given, streaming finished episodes back. It takes a trainer's weights (:meth:`load_weights`)
and says which it holds (:meth:`digest`, :func:`weights_digest`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.rollout.driver import run_window
from gymflow.rollout.engine import CollectSettings, env_client
from gymflow.rollout.episode import Episode
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.store import Planned

Done = tuple[Planned, Episode | None, GymflowError | None]
"""One finished rollout, as the window hands it to ``on_done``."""


class RolloutWorker:
    """One rollout worker (run as a Ray actor): a policy backend, an env client, the driver."""

    def __init__(
        self,
        env: Environment,
        settings: CollectSettings,
        tasks: list[Task],
        env_url: str | None = None,
        env_timeout_s: float = 30.0,
        env_retries: int = 3,
    ) -> None:
        from gymflow.policy.spec import load_policy

        self.env, self.settings = env, settings
        self.env_url, self.env_timeout_s, self.env_retries = env_url, env_timeout_s, env_retries
        self.policy = load_policy(settings.policy_spec, tasks=tasks)
        self.weights_version = 0
        """Which synced weights the model holds (0: the spec's own)."""
        self._client: EnvClient | None = None
        """One for the worker's life: an in-process app (and its verify pool) is built once."""

    def pid(self) -> int:
        """This worker's process id (for tests that kill it)."""
        return os.getpid()

    async def ready(self) -> int:
        """Build the env client now (its app, its verify pool) rather than in the first shard,
        so a collection's time is episodes, not set-up; this worker's process id."""
        self._env_client()
        return os.getpid()

    async def aclose(self) -> None:
        """Close the env client (its app, its verify pool): for a worker made for one shard."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _env_client(self) -> EnvClient:
        if self._client is None:  # on the actor's event loop, which lives as long as it does
            self._client = env_client(self.env, self.env_url, self.env_timeout_s, self.env_retries)
        return self._client

    def load_weights(self, weights: dict, version: int) -> str:
        """Load a trainer's state dict into this worker's model; the digest of what it holds."""
        model = getattr(self.policy, "model", None)
        if model is None or not hasattr(model, "load_state_dict"):
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"policy {self.settings.policy_spec!r} holds no weights to load (use a "
                "transformers backend, or sync a vLLM server through TRL)",
            )
        model.load_state_dict(weights, strict=True)
        self.weights_version = version
        return self.digest()

    def digest(self) -> str:
        """The digest of the weights this worker's model holds ("" for a model-less policy)."""
        model = getattr(self.policy, "model", None)
        return weights_digest(model.state_dict()) if hasattr(model, "state_dict") else ""

    async def run(
        self, shard: list[Planned], weights: tuple | None = None
    ) -> AsyncIterator[tuple[list[Done], list[int]]]:
        """Run ``shard`` in a window; yield what finished since the last yield, with the sizes
        of the generation calls made meanwhile (a Ray streaming generator).

        ``weights``: (version, object ref) of the weights the shard must be sampled with,
        loaded first if this worker holds others (it was restarted since they were synced).
        """
        if weights is not None and weights[0] != self.weights_version:
            self.load_weights(await weights[1], weights[0])
        s = self.settings
        finished: list[Done] = []
        woke = asyncio.Event()

        def on_done(p: Planned, episode: Episode | None, error: GymflowError | None) -> None:
            finished.append((p, episode, error))
            woke.set()

        turns = ModelTurns(self.policy, s.sampling, s.batch_wait_s)
        window = asyncio.ensure_future(
            run_window(self._env_client(), self.env, turns, shard, s.concurrency, on_done)
        )
        sent = 0
        while True:
            waiting = asyncio.ensure_future(woke.wait())
            await asyncio.wait({window, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            ended = window.done()  # before taking the batch: episodes end while we yield
            woke.clear()
            batch, finished[:] = finished[:], []
            sizes, sent = turns.batches[sent:], len(turns.batches)
            if batch or sizes:
                yield batch, sizes
            if ended:
                break
        window.result()  # a bug in the window is raised to the collecting process


def weights_digest(weights: dict) -> str:
    """A digest of a state dict's names and exact bytes (equal digests: equal weights)."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous().reshape(-1)
        digest.update(name.encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
