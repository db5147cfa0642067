"""Client for resources servers, in-process (ASGI, no sockets) or over HTTP.

Every call has a timeout and a capped number of retries with exponential backoff; after that
it raises ``GymflowError(ENV_UNAVAILABLE)`` instead of retrying forever. Answers with an
``error`` body (4xx) are not retried: they are the server telling us what was wrong; nor are
5xx answers whose kind says the same request would fail again (``verifier_error``,
``verify_timeout``, ``internal_error``): they raise with that kind at once.

Session affinity: ``base_url`` may name several replicas, and a server started with
``gymflow env serve --workers N`` lists its workers in ``/health``. New sessions go round-robin
over them; every later call for a session goes to the one that holds it (remembered at seed,
or read from the worker index in a generated session id).

Transports (a request here is a few hundred microseconds of work, so the client's own cost
decides rollouts/s over loopback): in-process calls the ASGI app directly with one scope
dict (httpx's ``ASGITransport`` costs several times more a call); HTTP uses aiohttp, whose
client CPU per request is a fraction of httpx's (``benchmarks/`` measures both).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any
from urllib.parse import quote, unquote

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task

TOKEN_ENV = "GYMFLOW_ENV_TOKEN"


class TransportFailure(Exception):
    """The request did not get an answer (connect refused, reset, timed out)."""


class AsgiTransport:
    """Call an ASGI app in this process: no sockets, no HTTP parsing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def send(
        self, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, bytes]:
        raw_path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": unquote(raw_path),
            "raw_path": raw_path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 0),
            "server": ("env", 80),
        }
        sent = False
        done = asyncio.Event()
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    done.set()

        try:
            await self.app(scope, receive, send)
        finally:  # an app that raises has a bug: it surfaces here, it is not retried
            done.set()
        return status, b"".join(chunks)

    async def aclose(self) -> None:
        pass


class HttpTransport:
    """HTTP/1.1 keep-alive over aiohttp (imported here: ``gymflow --help`` stays fast)."""

    def __init__(self, base_url: str, timeout_s: float, max_connections: int) -> None:
        self.base_url, self.timeout_s, self.max_connections = base_url, timeout_s, max_connections
        self._session = None

    async def send(
        self, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, bytes]:
        import aiohttp
        from yarl import URL

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        try:
            async with self._session.request(
                method,
                # encoded=True: keep the path as sent, or "/tools/%2E%2E" would resolve to "/"
                URL(self.base_url + path, encoded=True),
                data=body or None,
                headers={k.decode(): v.decode() for k, v in headers},
            ) as resp:
                return resp.status, await resp.read()
        except TimeoutError as exc:
            raise TransportFailure(f"Timeout after {self.timeout_s:g} s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise TransportFailure(f"ConnectError: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise TransportFailure(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class EnvClient:
    def __init__(
        self,
        app: Any = None,
        base_url: str | list[str] | None = None,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        max_connections: int = 16,
        token: str | None = None,
        discover_workers: bool = True,
    ) -> None:
        if (app is None) == (base_url is None):
            raise ValueError("give exactly one of app (in-process) or base_url (HTTP)")
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.max_connections = max_connections
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        if app is not None:
            self._targets: list[Any] = [AsgiTransport(app)]
        else:
            self._targets = [self._http(url) for url in urls]
        self._discover = discover_workers and app is None and len(urls) == 1
        self._discovery: asyncio.Future | None = None
        self._retired: list[HttpTransport] = []
        self._round_robin = itertools.cycle(range(len(self._targets)))
        self._owner: dict[str, int] = {}  # session id -> index into _targets
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._headers = [(b"content-type", b"application/json")]
        if token:
            self._headers.append((b"authorization", f"Bearer {token}".encode()))

    def _http(self, url: str) -> HttpTransport:
        return HttpTransport(url.rstrip("/"), self.timeout_s, self.max_connections)

    async def __aenter__(self) -> EnvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for target in [*self._targets, *self._retired]:
            await target.aclose()

    async def request(
        self, method: str, path: str, payload: dict | None = None, target: int = 0
    ) -> Any:
        body = b"" if payload is None else fast_json.dumps(payload)
        transport = self._targets[target]
        last = ""
        for attempt in range(self.retries + 1):
            try:
                status, raw = await transport.send(method, path, body, self._headers)
            except TransportFailure as exc:
                last = str(exc)
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                continue
            try:
                data = fast_json.loads(raw)
            except ValueError:
                data = None
            if status >= 500 and _error_kind(data) not in FINAL_SERVER_ERRORS:
                last = f"HTTP {status}: {_text(raw)}"
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                continue
            if status >= 400:
                err = data.get("error") if isinstance(data, dict) else None
                err = err if isinstance(err, dict) else {}
                try:
                    kind = FailureKind(err.get("kind", FailureKind.BAD_REQUEST))
                except ValueError:
                    kind = FailureKind.BAD_REQUEST
                message = err.get("message") or f"HTTP {status}: {_text(raw)}"
                raise GymflowError(kind, f"{path}: {message}")
            if data is None:
                raise GymflowError(
                    FailureKind.ENV_UNAVAILABLE, f"{path}: answer is not JSON: {_text(raw)!r}"
                )
            return data
        raise GymflowError(
            FailureKind.ENV_UNAVAILABLE,
            f"{path} failed after {self.retries + 1} attempts: {last}",
        )

    async def _workers(self) -> None:
        """Learn a multi-worker server's workers from ``/health``, once, before the first seed.

        Every concurrent first seed waits on the same lookup, so none goes out before the
        targets are known and no transport is swapped under a request in flight.
        """
        if not self._discover:
            return
        if self._discovery is None:
            self._discovery = asyncio.ensure_future(self.request("GET", "/health"))
        health = await self._discovery
        if not self._discover:
            return
        self._discover = False
        urls = [url.rstrip("/") for url in health.get("workers") or []]
        if len(urls) > 1:
            known = {t.base_url: t for t in self._targets}
            self._retired += [t for url, t in known.items() if url not in urls]
            self._targets = [known.get(url) or self._http(url) for url in urls]
            self._round_robin = itertools.cycle(range(len(urls)))

    async def _target_of(self, session_id: str) -> int:
        await self._workers()
        target = self._owner.get(session_id)
        if target is not None:
            return target
        head, sep, _ = session_id.partition("-")
        if sep and head[:1] == "w" and head[1:].isdigit() and int(head[1:]) < len(self._targets):
            return int(head[1:])
        return 0

    async def seed_session(self, task: Task, session_id: str | None = None) -> str:
        await self._workers()
        target = next(self._round_robin)
        payload = {"task": task.model_dump(), "session_id": session_id}
        sid = (await self.request("POST", "/seed_session", payload, target))["session_id"]
        if len(self._targets) > 1:
            self._owner[sid] = target
        return sid

    async def call_tool(self, session_id: str, name: str, arguments: dict) -> dict:
        # The name comes from the model: quote it (dots too) so it stays one path segment.
        segment = quote(name, safe="").replace(".", "%2E")
        payload = {"session_id": session_id, "arguments": arguments}
        return await self.request(
            "POST", f"/tools/{segment}", payload, await self._target_of(session_id)
        )

    async def verify(self, session_id: str, items: list[dict], close: bool = False) -> dict:
        """Score a trajectory; ``close=True`` also ends the session (one round trip less)."""
        payload = {"session_id": session_id, "items": items, "close": close}
        target = await self._target_of(session_id)
        if close:
            self._owner.pop(session_id, None)
        return await self.request("POST", "/verify", payload, target)

    async def close_session(self, session_id: str) -> bool:
        target = await self._target_of(session_id)
        self._owner.pop(session_id, None)
        payload = {"session_id": session_id}
        return (await self.request("POST", "/close_session", payload, target))["closed"]

    async def tools(self) -> list[dict]:
        return await self.request("GET", "/tools")


def _text(raw: bytes) -> str:
    return raw[:200].decode("utf-8", "replace")


FINAL_SERVER_ERRORS = frozenset(
    {FailureKind.VERIFIER_ERROR, FailureKind.VERIFY_TIMEOUT, FailureKind.INTERNAL_ERROR}
)
"""5xx answers that say the same request would fail again (a bug, a hang): not retried."""


def _error_kind(data: object) -> FailureKind | None:
    err = data.get("error") if isinstance(data, dict) else None
    try:
        return FailureKind(err.get("kind")) if isinstance(err, dict) else None
    except ValueError:
        return None
