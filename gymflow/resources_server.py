"""The resources server: any :class:`~gymflow.environment.Environment` as an ASGI app.

Endpoints: ``POST /seed_session`` (task → session id), ``POST /tools/{name}``,
``POST /verify`` (trajectory items → reward, components, failure kind),
``POST /close_session`` (idempotent), ``GET /tools``, ``GET /health``.

Sessions are explicit ids with a TTL and a cap; closed or expired sessions free their state,
and a closed id cannot be seeded again. Every error is JSON ``{"error": {"kind", "message"}}``
with a status code; a tool that raises returns its error as an observation (status 200,
``error`` set) that the model sees, never a crash. Bodies over ``max_body_bytes`` get 413, bodies
that are not UTF-8 JSON get 400, and nothing a request does touches another session.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from gymflow.environment import Environment
from gymflow.failures import FailureKind
from gymflow.task_record import Task


class SeedRequest(BaseModel):
    task: Task
    session_id: str | None = None


class ToolRequest(BaseModel):
    session_id: str
    arguments: dict[str, Any] = {}


class VerifyRequest(BaseModel):
    session_id: str
    items: list[dict]


class CloseRequest(BaseModel):
    session_id: str


@dataclass
class Session:
    task: Task
    state: Any
    expires_at: float
    tool_calls: int = 0
    log: list[dict] = field(default_factory=list)


class RequestError(Exception):
    def __init__(self, status: int, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class SessionStore:
    """Live sessions with TTL and a cap; remembers closed ids so they are never reused.

    Closed ids are remembered up to ``max_closed`` (oldest forgotten first), so a long-running
    server's memory stays bounded; random session ids never collide with a forgotten one.

    ``live`` is kept in order of last use (every touch moves a session to the end). All
    sessions share one TTL, so that is also the order of expiry and :meth:`expire` only looks
    at the sessions that actually expired, not at every live one.
    """

    def __init__(self, ttl_s: float, max_sessions: int, max_closed: int = 200_000) -> None:
        self.ttl_s, self.max_sessions, self.max_closed = ttl_s, max_sessions, max_closed
        self.live: dict[str, Session] = {}
        self.closed: dict[str, None] = {}  # insertion-ordered: the oldest closed id first

    def add(self, session_id: str, session: Session) -> None:
        self.expire()
        if session_id in self.closed or session_id in self.live:
            raise RequestError(
                409, FailureKind.SESSION_CLOSED, f"session {session_id} was already used"
            )
        if len(self.live) >= self.max_sessions:
            raise RequestError(
                429, FailureKind.BAD_REQUEST, f"session cap {self.max_sessions} reached"
            )
        self.live[session_id] = session

    def get(self, session_id: str) -> Session:
        session = self.live.get(session_id)
        now = time.monotonic()
        if session is None or session.expires_at < now:
            if session is not None:
                self.close(session_id)
            kind = (
                FailureKind.SESSION_CLOSED
                if session_id in self.closed
                else FailureKind.UNKNOWN_SESSION
            )
            raise RequestError(404, kind, f"no live session {session_id}")
        session.expires_at = now + self.ttl_s
        self.live[session_id] = self.live.pop(session_id)  # most recently used goes last
        return session

    def close(self, session_id: str) -> bool:
        self.closed[session_id] = None
        if len(self.closed) > self.max_closed:
            del self.closed[next(iter(self.closed))]
        return self.live.pop(session_id, None) is not None

    def expire(self) -> None:
        now = time.monotonic()
        expired = []
        for sid, session in self.live.items():
            if session.expires_at >= now:
                break
            expired.append(sid)
        for sid in expired:
            self.close(sid)


def build_app(
    env: Environment,
    ttl_s: float = 600.0,
    max_sessions: int = 100_000,
    max_body_bytes: int = 1 << 20,
) -> FastAPI:
    """An ASGI app serving ``env``; use in-process (httpx ASGITransport) or with uvicorn."""
    app = FastAPI(title=f"gymflow env {env.name}", version=env.version)
    store = SessionStore(ttl_s, max_sessions)
    app.state.sessions = store
    specs = env.tool_specs
    wants_session = {name: "session" in _parameters(spec.fn) for name, spec in specs.items()}

    async def body(request: Request, model: type[BaseModel]) -> Any:
        # Streamed with a cap: an oversized body is drained and dropped, never held in memory.
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size <= max_body_bytes:
                chunks.append(chunk)
            else:
                chunks.clear()
        if size > max_body_bytes:
            raise RequestError(
                413, FailureKind.PAYLOAD_TOO_LARGE, f"body of {size} bytes > {max_body_bytes}"
            )
        raw = b"".join(chunks)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(
                400, FailureKind.NOT_UTF8, f"body is not UTF-8 at byte {exc.start}"
            ) from None
        try:
            return model.model_validate(json.loads(text))
        except json.JSONDecodeError as exc:
            raise RequestError(
                400, FailureKind.INVALID_JSON, f"body is not JSON: {exc.msg}"
            ) from None
        except RecursionError:
            raise RequestError(
                400, FailureKind.INVALID_JSON, "body is not JSON: nested too deeply"
            ) from None
        except ValidationError as exc:
            raise RequestError(422, FailureKind.BAD_REQUEST, _errors(exc)) from None

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": {"kind": str(exc.kind), "message": exc.message}}, exc.status)

    @app.get("/health")
    async def health() -> dict:
        store.expire()
        return {"ok": True, "env": env.name, "version": env.version, "sessions": len(store.live)}

    @app.get("/tools")
    async def tools() -> list[dict]:
        return env.tool_schemas

    @app.post("/seed_session")
    async def seed_session(request: Request) -> dict:
        req = await body(request, SeedRequest)
        if req.task.env != env.name:
            raise RequestError(
                422, FailureKind.BAD_REQUEST, f"task is for {req.task.env}, not {env.name}"
            )
        session_id = req.session_id or uuid.uuid4().hex
        store.add(session_id, Session(req.task, env.new_state(req.task), time.monotonic() + ttl_s))
        return {"session_id": session_id, "prompt": req.task.prompt, "tools": req.task.tools}

    @app.post("/tools/{name:path}")  # any name the model made up reaches the handler
    async def call_tool(name: str, request: Request) -> dict:
        req = await body(request, ToolRequest)
        session = store.get(req.session_id)
        session.tool_calls += 1
        if name not in specs:
            return _tool_error(FailureKind.UNKNOWN_TOOL, f"no tool named {name!r}")
        spec = specs[name]
        try:
            args = spec.validate(req.arguments)
        except ValueError as exc:
            return _tool_error(FailureKind.BAD_ARGUMENTS, str(exc))
        if wants_session[name]:
            args["session"] = session.state
        try:
            return {"output": spec.fn(**args), "error": None}
        except Exception as exc:  # a tool's own failure is an observation for the model
            return _tool_error(FailureKind.TOOL_ERROR, f"{type(exc).__name__}: {exc}")

    @app.post("/verify")
    async def verify(request: Request) -> dict:
        req = await body(request, VerifyRequest)
        session = store.get(req.session_id)
        return env.verify(session.task, req.items).to_dict()

    @app.post("/close_session")
    async def close_session(request: Request) -> dict:
        req = await body(request, CloseRequest)
        return {"closed": store.close(req.session_id)}

    return app


def _parameters(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _tool_error(kind: FailureKind, message: str) -> dict:
    return {"output": None, "error": {"kind": str(kind), "message": message}}


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
