"""GRPO on external agents' episodes: the policy being trained, served behind the capturing proxy.

:class:`ExternalRollouts` is what :class:`gymflow.train.grpo.RolloutSource` uses when a run's
``grpo.rollout`` is the ``agents`` engine, naming agent programs. On first use it starts, on
loopback in this process, the OpenAI-compatible server of :mod:`gymflow.policy.openai_server`
over the trainer's current policy (swapped in before every batch: the trainer's own model, so
the weights sampled are the step's), and the capturing proxy (:mod:`gymflow.agent.proxy`) in front of it, which forces the
step's sampling (temperature, tokens per call) whatever the program asks, so the logprobs it
records are the ones TRL's loss assumes. The programs (:mod:`gymflow.agent.external`) then run
each planned rollout against the proxy; every rollout comes back as the driver's episode with
its token view, and the caller stores and trains on it like an in-process one.
"""

from __future__ import annotations

from typing import Any

from gymflow.agent.backend import Backend
from gymflow.agent.external import ExternalAgents
from gymflow.agent.proxy import build_proxy_app
from gymflow.agent.settings import ExternalAgentSettings
from gymflow.env.loopback import LoopbackServer
from gymflow.rollout.driver import OnDone
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import Planned


class CurrentPolicy:
    """A token-level policy whose backing model is swapped between batches (served as one)."""

    def __init__(self) -> None:
        self.policy: Any = None

    def __getattr__(self, name: str) -> Any:
        if name == "policy":
            raise AttributeError(name)
        return getattr(self.policy, name)


class ExternalRollouts:
    """Rollouts by external agent programs against the policy being trained (see module doc)."""

    def __init__(self, settings: ExternalAgentSettings, sampling: Sampling) -> None:
        self.settings, self.sampling = settings, sampling
        self.current = CurrentPolicy()
        self.agents = ExternalAgents(
            settings.programs,
            options=settings.options,
            concurrency=settings.concurrency,
            timeout_s=settings.episode_timeout_s,
        )  # fmt: skip  (programs load now: a bad entry point fails before training starts)
        self._servers: list[LoopbackServer] = []

    def _start(self) -> None:
        from gymflow.policy.openai_server import build_openai_app

        n = self.sampling.max_new_tokens
        policy_app = build_openai_app(
            self.current, "policy", max_tokens_limit=max(n, 1024), default_max_tokens=n
        )
        policy_server = LoopbackServer(policy_app).__enter__()
        self._servers.append(policy_server)
        temperature = 0.0 if self.sampling.greedy else self.sampling.temperature
        overrides = {"temperature": temperature, "max_tokens": n, "max_completion_tokens": n}
        backend = Backend(f"{policy_server.url}/v1", timeout_s=self.settings.episode_timeout_s)
        proxy = LoopbackServer(build_proxy_app(backend, overrides=overrides)).__enter__()
        self._servers.append(proxy)
        self.agents.proxy_url = proxy.url

    async def run(self, policy: Any, planned: list[Planned], on_done: OnDone) -> None:
        """Run ``planned`` with ``policy`` (this batch's weights) behind the proxy."""
        if not self._servers:
            self._start()
        self.current.policy = policy
        await self.agents(planned, on_done)

    def close(self) -> None:
        """Stop the proxy and the policy server (the next batch starts them again)."""
        for server in reversed(self._servers):
            server.__exit__()
        self._servers.clear()
        self.agents.close()

    def summary(self) -> dict:
        return self.agents.summary()
