"""The agent server: the one episode driver behind ``POST /run`` (what ``gymflow agent serve`` runs).

``POST /run`` (:class:`~gymflow.agent.wire.RunRequest`) runs one episode with
:func:`gymflow.rollout.driver.run_episode` — seed, model turns, tool calls, verify, close —
and answers it (:func:`gymflow.agent.wire.result_of`): the same driver, batcher and seeds as
the in-process window, so the same request gives the same tokens and reward here as there.
``GET /health`` says what the server holds (live episodes, loaded policies, limits).

Conventions shared with the resources server and ``gymflow policy serve``
(:mod:`gymflow.agent.conventions`): JSON errors with kinds; a bearer token off loopback; and
limits on the server's side — request bodies (``max_body_bytes``), episodes live at once
(``max_live``: one more is refused with 503 ``session_limit`` for the client to retry later),
tokens a request may ask for (``max_new_tokens_limit``, ``max_completion_tokens_limit``) and
an episode's wall time (``episode_timeout_s``: then its session is closed and the answer says
``timeout``). An episode an infrastructure fault stopped is answered with status 200 and
``error`` set (it is a rollout without a reward, as in-process); a request the server cannot
run (a bad body, an unknown task id, a policy spec that does not load) is an error status.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Request
from fastapi.responses import Response

from gymflow.agent.conventions import (
    authorizer,
    held_task,
    install_error_shape,
    json_response,
    read_model,
)
from gymflow.agent.runtime import EpisodeRuntime, policy_spec
from gymflow.agent.wire import RunRequest, error_result, result_of
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.resources_server import _body_schema, _openapi_with_bodies  # one way to document
from gymflow.env.sessions import RequestError
from gymflow.env.task_store import TaskStore
from gymflow.rollout.driver import run_episode


def build_agent_app(
    default_policy: str | None = None,
    tasks: TaskStore | None = None,
    token: str | None = None,
    max_live: int = 256,
    max_body_bytes: int = 4 << 20,
    max_new_tokens_limit: int = 1024,
    max_completion_tokens_limit: int = 1 << 16,
    episode_timeout_s: float = 600.0,
    runtime: EpisodeRuntime | None = None,
    workers: list[str] | None = None,
) -> FastAPI:
    """An ASGI app running episodes; serve it with uvicorn (``gymflow agent serve``) or
    :class:`~gymflow.env.loopback.LoopbackServer`.

    ``default_policy`` answers requests that name none; ``tasks`` holds the ground truth
    episodes are scored against (:func:`~gymflow.agent.conventions.held_task`; default: the
    client's tasks, trusted, as an app used in-process); ``workers`` are the URLs of every process of a ``--workers N`` server (listed by
    ``/health`` so clients spread over them)."""
    app = FastAPI(title="gymflow agent server")
    install_error_shape(app, "gymflow.agent")
    runtime = runtime or EpisodeRuntime()
    app.state.runtime = runtime
    app.state.live = 0
    app.state.episodes = 0
    app.router.on_shutdown.append(runtime.aclose)
    authorize = authorizer(token)
    known = tasks if tasks is not None else TaskStore(trust_client_tasks=True)

    @app.get("/health")
    async def health() -> Response:
        info = {
            "ok": True,
            "kind": "agent",
            "live": app.state.live,
            "episodes": app.state.episodes,
            "max_live": max_live,
            "policies": runtime.loaded,
            "default_policy": default_policy,
            "tasks": len(known),
            "client_tasks": known.trust_client_tasks,
        }
        if workers and len(workers) > 1:
            info["workers"] = list(workers)
        return json_response(info)

    @app.post("/run", openapi_extra=_body_schema(RunRequest))
    async def run(request: Request) -> Response:
        authorize(request)
        req: RunRequest = await read_model(request, RunRequest, max_body_bytes)
        task = held_task(known, req.task, req.task_id)
        if req.max_new_tokens > max_new_tokens_limit:
            raise _bad(
                f"max_new_tokens {req.max_new_tokens} > this server's {max_new_tokens_limit}"
            )
        if req.max_completion_tokens > max_completion_tokens_limit:
            raise _bad(
                f"max_completion_tokens {req.max_completion_tokens} > this server's "
                f"{max_completion_tokens_limit}"
            )
        spec = req.policy or default_policy
        if spec is None:
            raise _bad("name a policy (this server was started without --policy)")
        if app.state.live >= max_live:
            raise RequestError(
                503,
                FailureKind.SESSION_LIMIT,
                f"{app.state.live} episodes live, this server's limit; retry later",
            )
        app.state.live += 1  # counted from here: loading a policy holds a slot too
        try:
            env, client = runtime.environment(req.env, task)
            key, policy = await runtime.policy(policy_spec(spec, req.model), task)
            turns = runtime.turns(key, policy, req.sampling())
            try:
                ep = await asyncio.wait_for(
                    run_episode(client, env, turns, task, req.seed), episode_timeout_s
                )
            except TimeoutError:
                error = GymflowError(
                    FailureKind.TIMEOUT, f"episode over this server's {episode_timeout_s:g} s"
                )
                return json_response(error_result(task, req.seed, error))
            except GymflowError as exc:  # the env down, a refused call: a rollout without reward
                return json_response(error_result(task, req.seed, exc))
        finally:
            app.state.live -= 1
        app.state.episodes += 1
        return json_response(result_of(ep))

    _openapi_with_bodies(app, [RunRequest])
    return app


def _bad(message: str) -> RequestError:
    return RequestError(422, FailureKind.BAD_REQUEST, message)
