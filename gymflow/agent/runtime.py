"""What an agent server holds between requests: loaded policies, environment clients, and one
:class:`~gymflow.rollout.model_turns.ModelTurns` per (policy, sampling).

Concurrent ``/run`` requests for the same policy and sampling share a ``ModelTurns``, so their
model turns are batched exactly as the in-process window batches its episodes; every turn
still samples with its own episode's seed, so an episode's tokens do not depend on which
requests share its batch. Policies are loaded once (in a thread, one load per spec at a time)
and kept, at most ``max_policies`` of them (the least recently used is dropped first);
``scripted:ENV`` replays the gold answers of the tasks it is given, so it is built per request.
An environment named by the request runs in this process (its resources server app, no
sockets); one given as a URL is a resources server reached over HTTP.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Any

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.rollout.episode import Sampling
from gymflow.rollout.model_turns import ModelTurns

_LOADING = threading.Lock()
"""One model load at a time in a process: transformers' loader patches torch globally (empty
weights on the meta device), so two loads in two threads break each other."""


def _load(parsed: Any) -> Any:
    from gymflow.policy.spec import load_policy

    with _LOADING:
        return load_policy(parsed)


def policy_spec(policy: str, model: str | None = None) -> str:
    """A request's policy as a spec: an ``http(s)://`` base URL becomes the ``openai`` backend
    asking for token ids (vLLM serve and ``gymflow policy serve`` return them)."""
    if policy.startswith(("http://", "https://")):
        return f"openai:{policy.rstrip('/')}?model={model or 'default'}&token_ids=1"
    return policy


class _EncodeEveryTime(dict):
    """The driver's prompt cache, made to miss: it is keyed by task id, and tasks from different
    callers may share an id with different prompts. Holds the entry just written, nothing more."""

    def __contains__(self, key: object) -> bool:
        return False

    def __setitem__(self, key: Any, value: Any) -> None:
        self.clear()
        super().__setitem__(key, value)


class EpisodeRuntime:
    """Policies, environment clients and model-turn batchers of one agent server process."""

    def __init__(
        self,
        max_policies: int = 2,
        env_token: str | None = None,
        env_timeout_s: float = 30.0,
        env_retries: int = 3,
        batch_wait_s: float = 0.01,
    ) -> None:
        self.max_policies, self.batch_wait_s = max_policies, batch_wait_s
        self.env_token, self.env_timeout_s, self.env_retries = env_token, env_timeout_s, env_retries
        self._policies: OrderedDict[str, Any] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}
        self._turns: dict[tuple[str, Sampling], ModelTurns] = {}
        self._clients: dict[str, EnvClient] = {}
        self._apps: list[Any] = []

    async def policy(self, spec: str, task: Task) -> tuple[str, Any]:
        """``(key, policy)`` for ``spec``; ``key`` names it for batching (one per loaded policy)."""
        from gymflow.policy.spec import load_policy, parse_spec

        parsed = parse_spec(spec)  # a bad spec is a bad request, refused before any loading
        if parsed.backend == "scripted" and not parsed.target.startswith("replies="):
            return f"{spec}#{id(task)}", load_policy(parsed, tasks=[task])
        if spec in self._policies:
            self._policies.move_to_end(spec)
            return spec, self._policies[spec]
        lock = self._loading.setdefault(spec, asyncio.Lock())
        async with lock:
            if spec not in self._policies:
                self._policies[spec] = await asyncio.to_thread(_load, parsed)
                while len(self._policies) > self.max_policies:
                    dropped, _ = self._policies.popitem(last=False)
                    self._turns = {k: v for k, v in self._turns.items() if k[0] != dropped}
        return spec, self._policies[spec]

    def preload(self, spec: str) -> None:
        """Load ``spec`` now (a server's ``--policy``: a bad one fails at start, not per request)."""
        from gymflow.policy.spec import parse_spec

        parsed = parse_spec(spec)
        if parsed.backend == "scripted" and not parsed.target.startswith("replies="):
            return  # built per request from the request's task
        self._policies[spec] = _load(parsed)

    def turns(self, key: str, policy: Any, sampling: Sampling) -> ModelTurns:
        """The batcher of ``key``'s turns at ``sampling`` (a scripted policy gets its own)."""
        if "#" in key:
            return self._fresh(policy, sampling)
        if (key, sampling) not in self._turns:
            self._turns[(key, sampling)] = self._fresh(policy, sampling)
        return self._turns[(key, sampling)]

    def _fresh(self, policy: Any, sampling: Sampling) -> ModelTurns:
        turns = ModelTurns(policy, sampling, self.batch_wait_s)
        turns.prompt_cache = _EncodeEveryTime()
        return turns

    def environment(self, where: str | None, task: Task) -> tuple[Environment, EnvClient]:
        """The task's environment and a client of it: in-process when ``where`` is its name (or
        None), over HTTP when ``where`` is a resources server's URL."""
        from gymflow.env.registry import get_env

        env = get_env(task.env)
        key = where or task.env
        if not key.startswith(("http://", "https://")) and key != task.env:
            raise GymflowError(
                FailureKind.BAD_REQUEST, f"task {task.task_id} is for {task.env}, not {key}"
            )
        if key not in self._clients:
            if key.startswith(("http://", "https://")):
                self._clients[key] = EnvClient(
                    base_url=key, timeout_s=self.env_timeout_s, retries=self.env_retries,
                    token=self.env_token,
                )  # fmt: skip
            else:
                from gymflow.env.resources_server import build_app

                app = build_app(env)
                self._apps.append(app)
                self._clients[key] = EnvClient(
                    app=app, timeout_s=self.env_timeout_s, retries=self.env_retries
                )
        return env, self._clients[key]

    @property
    def loaded(self) -> list[str]:
        return list(self._policies)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        for app in self._apps:
            app.state.verifier.shutdown()
        self._clients.clear()
        self._apps.clear()
