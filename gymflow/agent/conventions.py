"""The server conventions the agent server and the capturing proxy share with the resources
server (:mod:`gymflow.env.resources_server`) and ``gymflow policy serve``.

* Errors are JSON ``{"error": {"kind", "message"}}`` with a status code, whatever raised them:
  a :class:`~gymflow.env.sessions.RequestError`, a ``GymflowError`` (its kind decides the
  status), a route that does not exist, a body that does not validate, or a bug (500,
  ``internal_error``, logged with its traceback for the operator).
* Bodies are read with a cap (413 ``payload_too_large``; an oversized body is drained, never
  held), must be UTF-8 JSON (400 ``not_utf8`` / ``invalid_json``) and validate against the
  route's model (422 ``bad_request``).
* With a token, every route but ``/health`` wants ``Authorization: Bearer <token>``
  (401 ``unauthorized``); :func:`gymflow.env.serve.check_bind` refuses a non-loopback bind
  without one.
* Ground truth is the server's own (:mod:`gymflow.env.task_store`): a request names a task it
  holds by id, or sends a whole task equal to its copy; any other task is refused (403
  ``unauthorized``) unless the server trusts its clients' tasks — the default of an app built
  in-process, where the client is the program itself (:func:`held_task`).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.http_body import read_json
from gymflow.env.sessions import RequestError
from gymflow.env.task_store import TaskStore

STATUS = {
    FailureKind.BAD_REQUEST: 422,
    FailureKind.UNAUTHORIZED: 401,
    FailureKind.UNKNOWN_SESSION: 404,
    FailureKind.SESSION_CLOSED: 410,
    FailureKind.SESSION_LIMIT: 503,
    FailureKind.PAYLOAD_TOO_LARGE: 413,
    FailureKind.BACKEND_UNAVAILABLE: 503,
    FailureKind.UNUSABLE_CHECKPOINT: 422,
    FailureKind.TIMEOUT: 504,
}
"""The status a ``GymflowError`` of a kind gets (other kinds: 502, a service behind us failed)."""


def json_response(content: Any, status: int = 200) -> Response:
    return Response(fast_json.dumps(content), status, media_type="application/json")


def error_response(status: int, kind: FailureKind | str, message: str) -> Response:
    return json_response({"error": {"kind": str(kind), "message": message}}, status)


def install_error_shape(app: FastAPI, logger: str) -> None:
    """Every error of ``app`` in the JSON shape above."""

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, exc: RequestError) -> Response:
        return error_response(exc.status, exc.kind, exc.message)

    @app.exception_handler(GymflowError)
    async def _gymflow_error(_: Request, exc: GymflowError) -> Response:
        return error_response(STATUS.get(exc.kind, 502), exc.kind, exc.detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(exc.status_code, FailureKind.BAD_REQUEST, message)

    @app.exception_handler(Exception)  # Starlette's outermost handler: a bug, said as one
    async def _bug(request: Request, exc: Exception) -> Response:
        logging.getLogger(logger).exception("request failed: %s", request.url.path)
        return error_response(500, FailureKind.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


def authorizer(token: str | None):
    """``check(request)`` raising 401 unless the request carries the bearer ``token``."""
    expected = f"Bearer {token}".encode() if token else None

    def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise RequestError(
                401, FailureKind.UNAUTHORIZED, "missing or wrong bearer token (Authorization)"
            )

    return check


async def read_model(request: Request, model: type[BaseModel], max_bytes: int) -> Any:
    """The body validated as ``model`` (422 ``bad_request`` naming the first problems)."""
    raw, _ = await read_json(request, max_bytes, fast_json.loads)
    try:
        return model.model_validate(raw)
    except RecursionError:
        raise RequestError(400, FailureKind.INVALID_JSON, "body nested too deeply") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise RequestError(422, FailureKind.BAD_REQUEST, problems) from None


def held_task(store: TaskStore, task: Task | None, task_id: str | None) -> Task:
    """The task a request names: one ``store`` holds (by id, or a whole task equal to its
    copy), or the client's own when ``store`` trusts its clients' tasks."""
    if task is not None:
        return store.task_for(task.env, task, None)
    held = store.tasks.get(task_id or "")
    if held is None:
        where = f"the {len(store)} it holds" if len(store) else "none (start it with --tasks FILE)"
        raise RequestError(
            404, FailureKind.BAD_REQUEST, f"no task {task_id!r}: this server has {where}"
        )
    return held
