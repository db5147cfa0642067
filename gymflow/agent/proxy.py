"""The capturing proxy: an OpenAI-compatible endpoint in front of any policy backend that turns
an agent's episodes — whatever framework wrote the agent — into trainable rollout rows.

An episode is opened by whoever drives the agent (``POST /episodes`` with a task; the proxy
seeds an environment session) and the agent is pointed at it: ``base_url`` =
``<proxy>/episodes/<id>/v1`` (a path segment), or ``<proxy>/v1`` with the header
``X-Gymflow-Episode: <id>``. Every ``chat/completions`` request is forwarded to the backend
(:mod:`gymflow.agent.backend`) with ``logprobs`` and vLLM's ``return_token_ids`` asked for and,
unless the agent set one, a seed (the episode's seed + the call's index); the backend's answer
goes back to the agent as it was written (the extras it did not ask for removed), and the
proxy records the call (:mod:`gymflow.agent.capture`): messages and tools sent, text and tool
calls returned, prompt and completion token ids and logprobs as the backend returned them.
The agent may run its tools itself or through ``POST /episodes/<id>/tools/<name>`` (the
environment's tool in the episode's session: stateful environments see the calls).
``POST /episodes/<id>/end`` has the environment verify the trajectory and answers the
episode in ``/run``'s form (:mod:`gymflow.agent.wire`); with a store (:mod:`gymflow.agent.proxy_store`)
it is also written as a rollout row.

Conventions as the agent server's (:mod:`gymflow.agent.conventions`), plus limits: episodes
open at once (``max_episodes``), model calls per episode (``max_calls``), and an episode's
life (``episode_ttl_s``: an episode not ended by then is closed; with a store it becomes a row
without a reward, kind ``timeout``). Streaming and ``n > 1`` are refused: they cannot be
recorded as one sampled turn.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, ValidationError

from gymflow.agent.backend import Backend
from gymflow.agent.capture import Capture, ModelCall, ToolCall
from gymflow.agent.conventions import (
    authorizer,
    held_task,
    install_error_shape,
    json_response,
    read_model,
)
from gymflow.agent.proxy_store import ProxyStore
from gymflow.agent.runtime import EpisodeRuntime
from gymflow.agent.wire import error_result, result_of
from gymflow.core import fast_json
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.http_body import read_json
from gymflow.env.resources_server import SESSION_ID
from gymflow.env.sessions import RequestError
from gymflow.env.task_store import TaskStore
from gymflow.policy.openai_backend import ChatCompletion, to_turn
from gymflow.rollout.driver import _set_score  # the driver's one rule for cut-off episodes

EPISODE_HEADER = "x-gymflow-episode"


class OpenEpisode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Task | None = None
    task_id: str | None = None
    seed: int | None = None
    """Sampling seed of the episode's first call (call k: seed + k); default: the store's plan."""
    env: str | None = None
    """Environment name (in the proxy's process) or resources server URL; default: the task's."""
    episode_id: str | None = None
    """Choose the id (1-128 of ``[A-Za-z0-9_.:-]``, never used before); default: a random one."""


class _Live:
    """Open episodes and the ids ever used (an id is never reused)."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[Capture, Any, Any]] = {}  # id -> (capture, env, client)
        self.used: set[str] = set()
        self.failed: dict[str, GymflowError] = {}


def build_proxy_app(
    backend: Backend,
    tasks: TaskStore | None = None,
    store: ProxyStore | None = None,
    token: str | None = None,
    runtime: EpisodeRuntime | None = None,
    max_episodes: int = 1024,
    max_calls: int = 128,
    episode_ttl_s: float = 3600.0,
    max_body_bytes: int = 8 << 20,
    overrides: dict | None = None,
) -> FastAPI:
    """An ASGI app proxying ``backend`` (``gymflow agent proxy``; tests: LoopbackServer).

    ``overrides`` replace fields of every forwarded request (training sets ``temperature`` and
    the token limits, so the logprobs recorded are those of the sampling the trainer assumes)."""
    app = FastAPI(title="gymflow capturing proxy")
    install_error_shape(app, "gymflow.agent.proxy")
    runtime = runtime or EpisodeRuntime()
    live = _Live()
    app.state.live, app.state.runtime, app.state.store = live, runtime, store
    app.state.calls = 0
    authorize = authorizer(token)
    known = tasks if tasks is not None else TaskStore(trust_client_tasks=True)
    forced = dict(overrides or {})

    async def shutdown() -> None:
        for eid in list(live.open):
            await _expire(eid, "the proxy stopped")
        if store is not None:
            store.flush()
        await backend.aclose()
        await runtime.aclose()

    app.router.on_shutdown.append(shutdown)

    async def _expire(eid: str, why: str) -> None:
        capture, _, client = live.open.pop(eid)
        await client.close_session(capture.session_id)
        if store is not None:
            error = GymflowError(FailureKind.TIMEOUT, f"episode {eid} was not ended: {why}")
            store.add(capture, None, error)

    async def expire_old() -> None:
        now = time.time()
        for eid, (capture, _, _) in list(live.open.items()):
            if now - capture.started_at > episode_ttl_s:
                await _expire(eid, f"open longer than {episode_ttl_s:g} s")

    def episode(eid: str | None) -> tuple[Capture, Any, Any]:
        if not eid:
            raise RequestError(
                400, FailureKind.BAD_REQUEST,
                f"which episode? call <proxy>/episodes/<id>/v1 or send {EPISODE_HEADER}",
            )  # fmt: skip
        if eid not in live.open:
            kind = FailureKind.SESSION_CLOSED if eid in live.used else FailureKind.UNKNOWN_SESSION
            status = 410 if eid in live.used else 404
            raise RequestError(status, kind, f"no open episode {eid!r}")
        return live.open[eid]

    @app.get("/health")
    async def health() -> Response:
        await expire_old()
        info = {
            "ok": True,
            "kind": "proxy",
            "backend": backend.base_url,
            "episodes": len(live.open),
        }
        info |= {"calls": app.state.calls, "tasks": len(known)}
        return json_response(info | {"client_tasks": known.trust_client_tasks})

    @app.post("/episodes")
    async def open_episode(request: Request) -> Response:
        authorize(request)
        await expire_old()
        req: OpenEpisode = await read_model(request, OpenEpisode, max_body_bytes)
        if (req.task is None) == (req.task_id is None):
            raise RequestError(422, FailureKind.BAD_REQUEST, "give exactly one of task or task_id")
        task = held_task(known, req.task, req.task_id)
        if len(live.open) >= max_episodes:
            raise RequestError(503, FailureKind.SESSION_LIMIT, f"{len(live.open)} episodes open")
        eid = req.episode_id or secrets.token_hex(12)
        if not SESSION_ID.fullmatch(eid):
            raise RequestError(422, FailureKind.BAD_REQUEST, "episode_id: 1-128 of [A-Za-z0-9_.:-]")
        if eid in live.used:
            raise RequestError(409, FailureKind.SESSION_EXISTS, f"episode id {eid!r} was used")
        env, client = runtime.environment(req.env, task)
        planned = store.plan(task, req.seed) if store is not None else None
        seed = planned.seed if planned is not None else (req.seed or 0)
        session_id = await client.seed_session(task)
        capture = Capture(eid, task, seed, session_id)
        if planned is not None:
            store.opened(capture, planned)
        live.used.add(eid)
        live.open[eid] = (capture, env, client)
        root = f"{str(request.base_url).rstrip('/')}/episodes/{eid}"
        return json_response({
            "episode_id": eid, "seed": seed, "base_url": f"{root}/v1",
            "tools_url": f"{root}/tools", "prompt": task.prompt, "tools": task.tools,
        })  # fmt: skip

    async def chat(eid: str | None, request: Request) -> Response:
        authorize(request)
        capture, _, _ = episode(eid)
        body, _ = await read_json(request, max_body_bytes, fast_json.loads)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise RequestError(422, FailureKind.BAD_REQUEST, "a chat completion needs messages")
        if body.get("stream"):
            raise RequestError(
                400, FailureKind.BAD_REQUEST, "stream is not captured: send stream false"
            )
        if (body.get("n") or 1) != 1:
            raise RequestError(400, FailureKind.BAD_REQUEST, "only n=1 is captured")
        if len(capture.calls) >= max_calls:
            raise RequestError(
                429, FailureKind.SESSION_LIMIT, f"{max_calls} model calls, the limit"
            )
        asked = {k: body.get(k) for k in ("logprobs", "return_token_ids")}
        seed = body.get("seed")
        seed = seed if isinstance(seed, int) else capture.seed + len(capture.calls)
        sent = {**body, **forced, "logprobs": True, "return_token_ids": True, "seed": seed}
        started = time.perf_counter()
        try:
            status, raw = await backend.send("POST", "/chat/completions", sent)
        except GymflowError as exc:
            live.failed.setdefault(capture.episode_id, exc)
            raise
        if status >= 400:  # the agent's request was wrong: it sees why, as written
            return Response(raw, status, media_type="application/json")
        try:
            answer = fast_json.loads(raw)
            turn = to_turn(ChatCompletion.model_validate(answer))
        except ValueError as exc:  # not JSON, or not a chat completion (a ValidationError)
            problem = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            error = GymflowError(
                FailureKind.POLICY_ERROR, f"backend answer is not a chat completion: {problem}"
            )
            live.failed.setdefault(capture.episode_id, error)
            raise error from None
        latency = time.perf_counter() - started
        capture.calls.append(ModelCall(body["messages"], body.get("tools"), turn, seed, latency))
        app.state.calls += 1
        return json_response(_as_asked(answer, asked))

    @app.post("/episodes/{eid}/v1/chat/completions")
    async def chat_by_path(eid: str, request: Request) -> Response:
        return await chat(eid, request)

    @app.post("/v1/chat/completions")
    async def chat_by_header(request: Request) -> Response:
        return await chat(request.headers.get(EPISODE_HEADER), request)

    async def models(request: Request) -> Response:
        authorize(request)
        status, raw = await backend.send("GET", "/models")
        return Response(raw, status, media_type="application/json")

    app.get("/v1/models")(models)
    app.get("/episodes/{eid}/v1/models")(models)

    @app.post("/episodes/{eid}/tools/{name:path}")
    async def tool(eid: str, name: str, request: Request) -> Response:
        authorize(request)
        capture, _, client = episode(eid)
        arguments, _ = await read_json(request, max_body_bytes, fast_json.loads)
        if not isinstance(arguments, dict):
            raise RequestError(422, FailureKind.BAD_REQUEST, "tool arguments are a JSON object")
        result = await client.call_tool(capture.session_id, name, arguments)
        shown = result["output"] if result["error"] is None else {"error": result["error"]}
        capture.tools.append(ToolCall(name, arguments, json.dumps(shown), len(capture.calls)))
        return json_response(result)

    @app.post("/episodes/{eid}/end")
    async def end(eid: str, request: Request) -> Response:
        authorize(request)
        capture, _, client = episode(eid)
        del live.open[eid]
        ep, error = capture.episode(), live.failed.pop(eid, None)
        try:
            if error is not None:  # the backend failed a call: no verdict, as in-process
                await client.close_session(capture.session_id)
                ep.policy_failed = True
                ep.score = _policy_failure(error)
            elif not capture.calls:
                await client.close_session(capture.session_id)
                raise GymflowError(
                    FailureKind.AGENT_UNAVAILABLE, f"episode {eid} ended before any model call"
                )
            else:
                _set_score(ep, await client.verify(capture.session_id, ep.items, close=True))
        except GymflowError as exc:
            if store is not None:
                store.add(capture, None, exc)
            return json_response(error_result(capture.task, capture.seed, exc))
        if store is not None:
            store.add(capture, ep, None)
        return json_response(result_of(ep))

    @app.get("/episodes/{eid}")
    async def status(eid: str, request: Request) -> Response:
        authorize(request)
        capture, _, _ = episode(eid)
        return json_response(
            {"episode_id": eid, "task_id": capture.task.task_id, "calls": len(capture.calls),
             "tools": len(capture.tools), "seed": capture.seed}
        )  # fmt: skip

    return app


def _as_asked(body: dict, asked: dict) -> dict:
    """The backend's answer without the extras the proxy asked for and the agent did not."""
    if not asked.get("return_token_ids"):
        body.pop("prompt_token_ids", None)
    for choice in body.get("choices") or []:
        if not asked.get("return_token_ids"):
            choice.pop("token_ids", None)
        if not asked.get("logprobs"):
            choice["logprobs"] = None
    return body


def _policy_failure(error: GymflowError) -> dict:
    return {
        "reward": 0.0,
        "success": False,
        "failure_kind": str(error.kind),
        "components": {},
        "detail": f"policy: {error.detail}",
    }
