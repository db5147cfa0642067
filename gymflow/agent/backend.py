"""The policy backend behind the capturing proxy: any OpenAI-compatible server, reached with a
timeout and capped retries, over the resources-server client's aiohttp transport
(:class:`gymflow.env.client.HttpTransport`: a fraction of httpx's CPU per request, which is
most of what a proxied call costs).

Retried (with exponential backoff, at most ``retries`` times): no answer (connection refused,
reset, timed out), 408, 429 and 5xx. Not retried: other 4xx, which the proxy hands back to the
agent as the backend wrote them (the request was wrong; the agent should see why). After the
retries: ``GymflowError(POLICY_UNAVAILABLE)`` or ``(TIMEOUT)``, which the proxy answers with
a JSON error and records as the episode's policy failure (no reward, never a silent 0).
"""

from __future__ import annotations

import asyncio

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.client import HttpTransport, TransportFailure

RETRIED_STATUS = {408, 429}


class Backend:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_connections: int = 256,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.max_connections = max_connections
        self._headers = [(b"content-type", b"application/json")]
        if api_key:
            self._headers.append((b"authorization", f"Bearer {api_key}".encode()))
        self._transport: HttpTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> HttpTransport:
        loop = asyncio.get_running_loop()  # a pool belongs to one event loop
        if self._transport is None or self._loop is not loop:
            self._loop = loop
            self._transport = HttpTransport(self.base_url, self.timeout_s, self.max_connections)
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None and self._loop is asyncio.get_running_loop():
            await self._transport.aclose()
        self._transport = None

    async def send(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """``(status, body)`` of the backend's answer (status < 500, not 408/429), or
        ``GymflowError`` after the retries."""
        transport = self._client()
        raw = b"" if body is None else fast_json.dumps(body)
        kind, why = FailureKind.POLICY_UNAVAILABLE, ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                status, answer = await transport.send(method, path, raw, self._headers)
            except TransportFailure as exc:
                timed_out = str(exc).startswith("Timeout")
                kind = FailureKind.TIMEOUT if timed_out else FailureKind.POLICY_UNAVAILABLE
                why = str(exc)
                continue
            if status >= 500 or status in RETRIED_STATUS:
                kind = FailureKind.POLICY_UNAVAILABLE
                why = f"HTTP {status}: {answer[:200].decode('utf-8', 'replace')}"
                continue
            return status, answer
        raise GymflowError(
            kind, f"{self.base_url}{path} failed after {self.retries + 1} attempts: {why}"
        )
