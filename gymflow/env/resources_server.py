"""The resources server: any :class:`~gymflow.env.environment.Environment` as an ASGI app.

Endpoints: ``POST /seed_session`` (task → session id), ``POST /tools/{name}``,
``POST /verify`` (trajectory items → reward, components, failure kind; ``"close": true`` also
ends the session, saving a round trip), ``POST /close_session`` (idempotent), ``GET /tools``,
``GET /health``.

Ground truth comes from the server (:mod:`gymflow.env.task_store`): ``/seed_session`` takes
``{"task_id": ...}`` of a task the server holds, or a whole task that it checks against its
own copy; a task it does not hold is refused (403 ``unauthorized``) unless the app trusts its
clients' tasks (``trust_client_tasks=True``: the default for an app called in-process, where
the client is the program itself; ``gymflow env serve`` passes ``False`` unless told
``--trust-client-tasks``).

Sessions (:mod:`gymflow.env.sessions`) are ids the server issues (random, unguessable) with a
TTL and caps in count and bytes; closed or expired sessions free their state, and an id is
never seeded twice. Client-chosen ids are off unless ``client_session_ids`` is set (then at most
128 characters of ``[A-Za-z0-9_.:-]``). Every error, whatever the path or the bug, is JSON
``{"error": {"kind", "message"}}`` with a status code; a tool that raises returns its error as
an observation (status 200, ``error`` set) that the model sees, never a crash. Bodies over
``max_body_bytes`` get 413, bodies that are not UTF-8 JSON (or hold a number JSON cannot read)
get 400, and nothing a request does touches another session.

What the caller sent decides the fault: a task the environment cannot use (its ground truth
lacks what the gold answer and verifier read) is refused at ``/seed_session`` with
``bad_request``; a trajectory that is not of the Responses shape is scored
``invalid_trajectory`` (the model's or client's fault, :mod:`gymflow.env.items`); a verifier
that raises on a well-formed one is ``verifier_error`` (500, a bug in the environment) and one
that hangs past ``verify_timeout_s`` is ``verify_timeout`` (heavy verifiers, which run in a
process pool, :mod:`gymflow.env.verify_pool`, or with ``verify_on="ray"`` on Ray actors,
:mod:`gymflow.env.ray_verify`).

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
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.env.http_body import read_json
from gymflow.env.items import ItemError, normalize_items
from gymflow.env.ray_verify import RayVerifyPool
from gymflow.env.sessions import RequestError, Session, SessionStore
from gymflow.env.task_store import TaskStore
from gymflow.env.verify_pool import VerifyPool

SESSION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""What a client-chosen session id may be (when the server allows them)."""


class SeedRequest(BaseModel):
    task_id: str | None = None
    """A task the server holds (see :mod:`gymflow.env.task_store`)."""
    task: Task | None = None
    """A whole task: scored as sent only by a server that trusts its clients' tasks."""
    session_id: str | None = None


class ToolRequest(BaseModel):
    session_id: str
    arguments: dict[str, Any] = {}


class VerifyRequest(BaseModel):
    session_id: str
    items: list[Any]
    """Read by :func:`~gymflow.env.items.normalize_items`: a bad item is scored, not refused."""
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
    client_session_ids: bool = False,
    verify_timeout_s: float = 60.0,
    max_live_bytes: int = 1 << 30,
    verify_on: str = "local",
    ray_address: str | None = None,
    tasks: TaskStore | None = None,
) -> FastAPI:
    """An ASGI app serving ``env``; use in-process (``EnvClient(app=...)``) or with uvicorn.

    ``tasks`` holds the ground truth sessions are seeded from; without it the app takes the
    tasks its client sends (in-process use: the client is this program). An app others can
    reach gets a :class:`TaskStore` (as ``gymflow env serve`` builds one).

    Heavy verifiers run in ``verify_workers`` local processes (``verify_on="local"``) or Ray
    actors (``"ray"``, on the cluster at ``ray_address``, the one this process is connected to,
    or a local one)."""
    app = FastAPI(title=f"gymflow env {env.name}", version=env.version)
    app.add_middleware(_ErrorShape)
    store = SessionStore(ttl_s, max_sessions, max_live_bytes)
    task_store = tasks if tasks is not None else TaskStore(trust_client_tasks=True)
    if verify_on == "ray":
        verifier = RayVerifyPool(env, verify_workers, verify_timeout_s, ray_address)
    elif verify_on == "local":
        verifier = VerifyPool(env, verify_workers, verify_timeout_s)
    else:
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"verify_on is 'local' or 'ray', not {verify_on!r}"
        )
    app.state.sessions, app.state.verifier, app.state.tasks = store, verifier, task_store
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
        parsed, size = await read_json(request, max_body_bytes)
        try:
            return model.model_validate(parsed), size
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

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return _json(
            {"error": {"kind": str(FailureKind.BAD_REQUEST), "message": message}}, exc.status_code
        )

    @app.get("/health")
    async def health() -> Response:
        store.expire()
        info = {"ok": True, "env": env.name, "version": env.version, "sessions": len(store.live)}
        info.update(tasks=len(task_store), client_tasks=task_store.trust_client_tasks)
        if worker is not None:
            info.update(worker=worker.index, workers=list(worker.urls))
        return _json(info)

    @app.get("/tools")
    async def tools(request: Request) -> Response:
        authorize(request)
        return _json(env.tool_schemas)

    @app.post("/seed_session", openapi_extra=_body_schema(SeedRequest))
    async def seed_session(request: Request) -> Response:
        req, size = await body(request, SeedRequest)
        task = task_store.task_for(env.name, req.task, req.task_id)
        if task.env != env.name:
            raise RequestError(
                422, FailureKind.BAD_REQUEST, f"task is for {task.env}, not {env.name}"
            )
        if req.session_id is not None and not client_session_ids:
            raise RequestError(
                422,
                FailureKind.BAD_REQUEST,
                "this server issues session ids; send no session_id (or start it with "
                "client-chosen ids allowed)",
            )
        if req.session_id is not None and not SESSION_ID.fullmatch(req.session_id):
            raise RequestError(
                422,
                FailureKind.BAD_REQUEST,
                "session_id must be 1 to 128 characters of letters, digits and _.:-",
            )
        try:
            env.check_task(task)
            state = env.new_state(task)
        except Exception as exc:  # the task's own data: the caller's fault, said as such
            raise RequestError(
                422,
                FailureKind.BAD_REQUEST,
                f"task {task.task_id} cannot be used by {env.name}: {type(exc).__name__}: {exc}",
            ) from None
        session_id = req.session_id or (worker.prefix if worker else "") + secrets.token_hex(16)
        store.add(session_id, Session(task, state, time.monotonic() + ttl_s, weight=size))
        return _json({"session_id": session_id, "prompt": task.prompt, "tools": task.tools})

    # any name the model made up reaches the handler
    @app.post("/tools/{name:path}", openapi_extra=_body_schema(ToolRequest))
    async def call_tool(name: str, request: Request) -> Response:
        req, _ = await body(request, ToolRequest)
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

    @app.post("/verify", openapi_extra=_body_schema(VerifyRequest))
    async def verify(request: Request) -> Response:
        req, _ = await body(request, VerifyRequest)
        session = session_of(req.session_id)
        try:
            items = normalize_items(req.items)
        except ItemError as exc:
            score = env.invalid_trajectory_score(str(exc)).to_dict()
        else:
            try:
                score = await verifier.verify(session.task, items)
            except RequestError:
                raise
            except GymflowError as exc:  # a verifier that reports its own kind (a judge down)
                raise RequestError(503, exc.kind, exc.detail) from None
            except Exception as exc:
                raise RequestError(
                    500,
                    FailureKind.VERIFIER_ERROR,
                    f"the {env.name} verifier raised {type(exc).__name__}: {exc} on a "
                    "well-formed trajectory (a bug in the environment)",
                ) from None
        if req.close:
            store.close(req.session_id)
        return _json(score)

    @app.post("/close_session", openapi_extra=_body_schema(CloseRequest))
    async def close_session(request: Request) -> Response:
        req, _ = await body(request, CloseRequest)
        return _json({"closed": store.close(req.session_id)})

    _openapi_with_bodies(app, [SeedRequest, ToolRequest, VerifyRequest, CloseRequest])
    return app


class _ErrorShape:
    """ASGI middleware: an exception no handler turned into an answer becomes a 500 in the
    error shape (kind ``internal_error``), logged with its traceback for the operator."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:
                raise
            logging.getLogger("gymflow.env").exception("request failed: %s", scope.get("path"))
            error = {
                "kind": str(FailureKind.INTERNAL_ERROR),
                "message": f"{type(exc).__name__}: {exc}",
            }
            response = _json({"error": error}, 500)
            await response(scope, receive, send)


def _body_schema(model: type[BaseModel]) -> dict:
    """The OpenAPI request body of a route that reads its body itself (see ``body``), so the
    schema documents it and schema-driven fuzzers (schemathesis) generate bodies for it.
    Nested models are referenced from ``components/schemas`` (:func:`_openapi_with_bodies`)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }


def _openapi_with_bodies(app: FastAPI, models: list[type[BaseModel]]) -> None:
    """FastAPI's schema plus the nested models the request bodies refer to."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                nested = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(nested.get("$defs", {}))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


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
