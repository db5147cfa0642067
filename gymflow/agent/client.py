"""Client of agent servers: ``POST /run`` spread over replicas, with timeouts and capped retries.

``urls`` are one or more agent servers; a single URL whose ``/health`` lists workers (``gymflow
agent serve --workers N``) is expanded to all of them before the first episode. Episodes go
round-robin; an attempt that gets no answer (connection refused, reset, timed out), a 5xx or a
503 ``session_limit`` (the replica is full) is retried on the next replica after a backoff, at
most ``retries`` times, then ``GymflowError(AGENT_UNAVAILABLE)``. A 4xx is the server saying
what was wrong with the request: raised at once with its kind. An episode holds no state on a
replica between requests, so any replica may run any attempt.

The transport is the resources-server client's (:class:`gymflow.env.client.HttpTransport`,
aiohttp keep-alive); the bearer token is ``token`` or ``GYMFLOW_AGENT_TOKEN``.
"""

from __future__ import annotations

import asyncio
import itertools
import os

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.client import HttpTransport, TransportFailure

TOKEN_ENV = "GYMFLOW_AGENT_TOKEN"
FINAL = frozenset({FailureKind.INTERNAL_ERROR})
"""5xx kinds that say the same request would fail again anywhere (a bug): not retried."""


class AgentClient:
    def __init__(
        self,
        urls: str | list[str],
        token: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        max_connections: int = 256,
    ) -> None:
        self.urls = [u.rstrip("/") for u in ([urls] if isinstance(urls, str) else urls)]
        if not self.urls:
            raise ValueError("an agent client needs at least one server URL")
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.max_connections = max_connections
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._headers = [(b"content-type", b"application/json")]
        if token:
            self._headers.append((b"authorization", f"Bearer {token}".encode()))
        self._targets = [HttpTransport(u, timeout_s, max_connections) for u in self.urls]
        self._next = itertools.cycle(range(len(self._targets)))
        self._discovered: asyncio.Future | None = None
        self._retired: list[HttpTransport] = []
        self.attempts = 0
        """Requests sent, retries included (for tests and reports)."""

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for target in [*self._targets, *self._retired]:
            await target.aclose()

    async def health(self, target: int = 0) -> dict:
        return await self._request("GET", "/health", None, target)

    async def run(self, body: dict) -> dict:
        """One episode's ``/run`` answer (see the module doc for retries and errors)."""
        await self._discover()
        return await self._request("POST", "/run", fast_json.dumps(body), None)

    async def post(self, path: str, body: dict, target: int = 0) -> dict:
        """``POST path`` to one server (a proxy's ``/episodes`` routes), retried as ``run``."""
        return await self._request("POST", path, fast_json.dumps(body), target)

    async def _discover(self) -> None:
        if len(self.urls) != 1:
            return
        if self._discovered is None:
            self._discovered = asyncio.ensure_future(self.health())
        health = await self._discovered
        workers = [u.rstrip("/") for u in health.get("workers") or []]
        if len(workers) > 1 and self.urls != workers:
            self.urls = workers
            self._retired += self._targets
            self._targets = [
                HttpTransport(u, self.timeout_s, self.max_connections) for u in workers
            ]
            self._next = itertools.cycle(range(len(self._targets)))

    async def _request(self, method: str, path: str, body: bytes | None, target: int | None):
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            index = next(self._next) if target is None else target
            transport = self._targets[index]
            self.attempts += 1
            try:
                status, raw = await transport.send(method, path, body or b"", self._headers)
            except TransportFailure as exc:
                last = f"{transport.base_url}: {exc}"
                continue
            try:
                data = fast_json.loads(raw)
            except ValueError:
                data = None
            kind, message = _error(data, status, raw)
            if status == 503 or (status >= 500 and kind not in FINAL):
                last = f"{transport.base_url}{path}: HTTP {status} [{kind}] {message}"
                continue
            if status >= 400:
                raise GymflowError(kind, f"{transport.base_url}{path}: {message}")
            if not isinstance(data, dict):
                last = f"{transport.base_url}{path}: answer is not a JSON object: {raw[:200]!r}"
                continue
            return data
        raise GymflowError(
            FailureKind.AGENT_UNAVAILABLE,
            f"{path} failed after {self.retries + 1} attempts: {last}",
        )


def _error(data: object, status: int, raw: bytes) -> tuple[FailureKind, str]:
    err = data.get("error") if isinstance(data, dict) else None
    err = err if isinstance(err, dict) else {}
    try:
        kind = FailureKind(err.get("kind", FailureKind.BAD_REQUEST))
    except ValueError:
        kind = FailureKind.BAD_REQUEST
    return kind, str(err.get("message") or raw[:200].decode("utf-8", "replace"))
