"""The policy backend behind the capturing proxy: any OpenAI-compatible server, reached with a
timeout and capped retries.

Retried (with exponential backoff, at most ``retries`` times): no answer (connection refused,
reset, timed out), 408, 429 and 5xx. Not retried: other 4xx, which the proxy hands back to the
agent as the backend wrote them (the request was wrong; the agent should see why). After the
retries: ``GymflowError(POLICY_UNAVAILABLE)`` or ``(TIMEOUT)``, which the proxy answers with
a JSON error and records as the episode's policy failure (no reward, never a silent 0).
"""

from __future__ import annotations

import asyncio

import httpx

from gymflow.core.failures import FailureKind, GymflowError

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
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()  # a pool belongs to one event loop
        if self._http is None or self._loop is not loop:
            self._loop = loop
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._headers,
                timeout=self.timeout_s,
                limits=httpx.Limits(max_connections=self.max_connections),
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = None

    async def send(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        """The backend's answer (status < 500, not 408/429), or ``GymflowError`` after retries."""
        http = self._client()
        kind, why = FailureKind.POLICY_UNAVAILABLE, ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = await http.request(method, path, json=body)
            except httpx.TimeoutException:
                kind, why = FailureKind.TIMEOUT, f"no answer within {self.timeout_s:g} s"
                continue
            except httpx.TransportError as exc:
                kind, why = FailureKind.POLICY_UNAVAILABLE, f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code >= 500 or resp.status_code in RETRIED_STATUS:
                kind, why = (
                    FailureKind.POLICY_UNAVAILABLE,
                    f"HTTP {resp.status_code}: {resp.text[:200]}",
                )
                continue
            return resp
        raise GymflowError(
            kind, f"{self.base_url}{path} failed after {self.retries + 1} attempts: {why}"
        )
