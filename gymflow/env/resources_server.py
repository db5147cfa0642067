"""The resources server: any :class:`~gymflow.env.environment.Environment` as an ASGI app.

Endpoints: ``POST /seed_session`` (task → session id), ``POST /tools/{name}``,
``POST /verify`` (trajectory items → reward, components, failure kind; ``"close": true`` also
ends the session, saving a round trip), ``POST /close_session`` (idempotent), ``GET /tools``,
``GET /health``.

Sessions (:mod:`gymflow.env.sessions`) are explicit ids with a TTL and a cap; closed or expired
sessions free their state, and a closed id cannot be seeded again. Every error is JSON
``{"error": {"kind", "message"}}`` with a status code; a tool that raises returns its error as
an observation (status 200, ``error`` set) that the model sees, never a crash. Bodies over
``max_body_bytes`` get 413, bodies that are not UTF-8 JSON get 400, and nothing a request does
touches another session. Heavy verifiers run in a process pool (:mod:`gymflow.env.verify_pool`).

With ``token`` set, every endpoint but ``/health`` wants ``Authorization: Bearer <token>``.
With ``worker`` set (``gymflow env serve --workers N``), session ids carry the worker's index
and ``/health`` lists every worker's URL, so clients send a session's calls to the process that
holds it; a call that reaches the wrong worker is refused with ``wrong_worker`` naming the
right one (see :mod:`gymflow.env.client`).

Answers are serialized with orjson (:mod:`gymflow.core.fast_json`) into a plain ``Response``: FastAPI's own path for returned
dicts (``jsonable_encoder`` + validation) cost more than the rest of a trivial request.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.env.sessions import RequestError, Session, SessionStore
from gymflow.env.verify_pool import VerifyPool


class SeedRequest(BaseModel):
    task: Task
    session_id: str | None = None


class ToolRequest(BaseModel):
    session_id: str
    arguments: dict[str, Any] = {}


class VerifyRequest(BaseModel):
    session_id: str
    items: list[dict]
    close: bool = False


class CloseRequest(BaseModel):
    session_id: str


@dataclass(frozen=True)
class WorkerInfo:
    """This process's place among the workers of one ``gymflow env serve --workers N``."""

    index: int
    urls: tuple[str, ...]

    @property
    def prefix(self) -> str:
        return f"w{self.index}-"

    def owner_of(self, session_id: str) -> int | None:
        """The worker index a generated session id names, if any."""
        head, sep, _ = session_id.partition("-")
        if sep and head[:1] == "w" and head[1:].isdigit():
            return int(head[1:])
        return None


def build_app(
    env: Environment,
    ttl_s: float = 600.0,
    max_sessions: int = 100_000,
    max_body_bytes: int = 1 << 20,
    token: str | None = None,
    worker: WorkerInfo | None = None,
    verify_workers: int | None = None,
) -> FastAPI:
    """An ASGI app serving ``env``; use in-process (``EnvClient(app=...)``) or with uvicorn."""
    app = FastAPI(title=f"gymflow env {env.name}", version=env.version)
    store = SessionStore(ttl_s, max_sessions)
    verifier = VerifyPool(env, verify_workers)
    app.state.sessions, app.state.verifier = store, verifier
    app.router.on_shutdown.append(verifier.shutdown)
    specs = env.tool_specs
    wants_session = {name: "session" in _parameters(spec.fn) for name, spec in specs.items()}
    blocking = set(env.blocking_tools)
    unknown = blocking - set(specs)
    if unknown:
        raise ValueError(f"{env.name}.blocking_tools names no tool: {sorted(unknown)}")
    expected_auth = f"Bearer {token}".encode() if token else None

    def authorize(request: Request) -> None:
        if expected_auth is None:
            return
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected_auth):
            raise RequestError(
                401, FailureKind.UNAUTHORIZED, "missing or wrong bearer token (Authorization)"
            )

    async def body(request: Request, model: type[BaseModel]) -> Any:
        authorize(request)
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

    def session_of(session_id: str) -> Session:
        try:
            return store.get(session_id)
        except RequestError as exc:
            if worker is None or exc.kind is not FailureKind.UNKNOWN_SESSION:
                raise
            owner = worker.owner_of(session_id)
            if owner is not None and owner != worker.index:
                where = worker.urls[owner] if owner < len(worker.urls) else f"worker {owner}"
                raise RequestError(
                    421, FailureKind.WRONG_WORKER, f"session {session_id} lives on {where}"
                ) from None
            raise

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, exc: RequestError) -> Response:
        return _json({"error": {"kind": str(exc.kind), "message": exc.message}}, exc.status)

    @app.get("/health")
    async def health() -> Response:
        store.expire()
        info = {"ok": True, "env": env.name, "version": env.version, "sessions": len(store.live)}
        if worker is not None:
            info.update(worker=worker.index, workers=list(worker.urls))
        return _json(info)

    @app.get("/tools")
    async def tools(request: Request) -> Response:
        authorize(request)
        return _json(env.tool_schemas)

    @app.post("/seed_session")
    async def seed_session(request: Request) -> Response:
        req = await body(request, SeedRequest)
        if req.task.env != env.name:
            raise RequestError(
                422, FailureKind.BAD_REQUEST, f"task is for {req.task.env}, not {env.name}"
            )
        session_id = req.session_id or (worker.prefix if worker else "") + uuid.uuid4().hex
        store.add(session_id, Session(req.task, env.new_state(req.task), time.monotonic() + ttl_s))
        return _json({"session_id": session_id, "prompt": req.task.prompt, "tools": req.task.tools})

    @app.post("/tools/{name:path}")  # any name the model made up reaches the handler
    async def call_tool(name: str, request: Request) -> Response:
        req = await body(request, ToolRequest)
        session = session_of(req.session_id)
        session.tool_calls += 1
        if name not in specs:
            return _json(_tool_error(FailureKind.UNKNOWN_TOOL, f"no tool named {name!r}"))
        spec = specs[name]
        try:
            args = spec.validate(req.arguments)
        except ValueError as exc:
            return _json(_tool_error(FailureKind.BAD_ARGUMENTS, str(exc)))
        if wants_session[name]:
            args["session"] = session.state
        try:
            if name in blocking:  # declared blocking: off the event loop, others go on
                output = await asyncio.to_thread(spec.fn, **args)
            else:
                output = spec.fn(**args)
            if inspect.isawaitable(output):  # an async tool (I/O-bound: waits without blocking)
                output = await output
        except Exception as exc:  # a tool's own failure is an observation for the model
            return _json(_tool_error(FailureKind.TOOL_ERROR, f"{type(exc).__name__}: {exc}"))
        return _json({"output": output, "error": None})

    @app.post("/verify")
    async def verify(request: Request) -> Response:
        req = await body(request, VerifyRequest)
        session = session_of(req.session_id)
        score = await verifier.verify(session.task, req.items)
        if req.close:
            store.close(req.session_id)
        return _json(score)

    @app.post("/close_session")
    async def close_session(request: Request) -> Response:
        req = await body(request, CloseRequest)
        return _json({"closed": store.close(req.session_id)})

    return app


def _json(content: Any, status: int = 200) -> Response:
    return Response(fast_json.dumps(content), status, media_type="application/json")


def _parameters(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _tool_error(kind: FailureKind, message: str) -> dict:
    return {"output": None, "error": {"kind": str(kind), "message": message}}


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
