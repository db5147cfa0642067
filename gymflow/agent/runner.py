"""Planned rollouts run on agent servers instead of this process's window.

:class:`AgentService` says where (agent server URLs) and with what (the policy spec and the
environment the servers are asked to use); :meth:`AgentService.runner` gives an
:class:`AgentRunner` for one sampling setting, an
:class:`~gymflow.rollout.engine.EpisodeRunner`: it sends one ``POST /run`` per planned rollout,
at most ``concurrency`` in flight, and hands each answer to ``on_done`` as the window would
(:func:`gymflow.agent.wire.episode_of`), so the one store builds the same rows from it. Planning,
seeds, rows and parts stay with the caller (a collection, an evaluation).

An answer with ``error`` (the environment went down mid-episode) is a rollout without a
reward; a request the servers refuse (a policy spec they cannot load, a bad token) stops the
whole run with that kind, since every other rollout would be refused the same way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gymflow.agent.client import AgentClient
from gymflow.agent.wire import episode_of, run_request
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.rollout.driver import OnDone
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import Planned

REFUSED = frozenset(
    {FailureKind.BAD_REQUEST, FailureKind.UNAUTHORIZED, FailureKind.PAYLOAD_TOO_LARGE,
     FailureKind.UNUSABLE_CHECKPOINT}
)  # fmt: skip
"""Kinds of a refused request: the next rollout would be refused the same way."""


@dataclass(frozen=True)
class AgentService:
    """Agent servers and what to ask them for."""

    urls: tuple[str, ...]
    policy: str | None
    """The policy spec the servers load (None: each server's own ``--policy``)."""
    env: str | None = None
    """An environment name or resources server URL (None: each task's own, in the server)."""
    token: str | None = None
    timeout_s: float = 600.0
    retries: int = 3

    def runner(self, sampling: Sampling, concurrency: int) -> AgentRunner:
        return AgentRunner(self, sampling, concurrency)


class AgentRunner:
    """Runs planned rollouts through ``POST /run`` (an ``EpisodeRunner``)."""

    def __init__(self, service: AgentService, sampling: Sampling, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.service, self.sampling, self.concurrency = service, sampling, concurrency
        self.requests = 0

    async def __call__(self, todo: list[Planned], on_done: OnDone) -> list[int]:
        s = self.service
        gate = asyncio.Semaphore(self.concurrency)
        async with AgentClient(list(s.urls), s.token, s.timeout_s, s.retries) as client:

            async def one(p: Planned) -> None:
                body = run_request(p.task, p.seed, self.sampling, s.policy, s.env)
                async with gate:
                    try:
                        answer = await client.run(body)
                    except GymflowError as exc:
                        if exc.kind in REFUSED:
                            raise
                        on_done(p, None, exc)
                        return
                on_done(p, *episode_of(p.task, p.seed, answer))

            runs = [asyncio.ensure_future(one(p)) for p in todo]
            try:
                await asyncio.gather(*runs)
            finally:
                for run in runs:
                    run.cancel()
                await asyncio.gather(*runs, return_exceptions=True)
            self.requests += client.attempts
        return []

    def summary(self) -> dict:
        return {"name": "agent", "servers": list(self.service.urls), "requests": self.requests}
