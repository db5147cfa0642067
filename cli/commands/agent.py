"""``gymflow agent``: agents as services.

* ``serve`` — the agent server: the episode driver behind ``POST /run`` (:mod:`gymflow.agent.server`);
* ``proxy`` — the capturing, OpenAI-compatible proxy in front of a policy backend
  (:mod:`gymflow.agent.proxy`), writing each episode as a rollout row with ``--out``;
* ``collect`` — external agent programs (LangGraph, the OpenAI Agents SDK, plain SDK code ...)
  run against a proxy started here, their episodes collected like ``gymflow rollouts collect``'s.

Imports stay inside the commands: ``gymflow --help`` does not pay for them.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import children_die_with_me, command_group

agent_app = command_group("Agents as services: the /run episode driver, a capturing proxy.")

TRUST_HELP = (
    "Also score tasks clients send that this server does not hold (their ground truth as "
    "sent); by default only --tasks are scored."
)


@agent_app.command("serve")
def agent_serve(
    policy: str = typer.Option(
        None, help="Policy spec preloaded and used by requests that name none."
    ),
    tasks: Path = typer.Option(
        None, help="Tasks requests may name by id (gymflow JSONL or a .parquet task table)."
    ),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8766, help="Port (workers use port … port+N-1)."),
    workers: int = typer.Option(1, min=1, help="Processes, each with its own policies."),
    token: str = typer.Option(
        None, envvar="GYMFLOW_AGENT_TOKEN", help="Require 'Authorization: Bearer TOKEN'."
    ),
    insecure: bool = typer.Option(False, help="Allow a non-loopback bind without a token."),
    max_live: int = typer.Option(256, min=1, help="Episodes live at once (more: 503)."),
    episode_timeout_s: float = typer.Option(600.0, help="An episode's wall-time limit."),
    trust_client_tasks: bool = typer.Option(False, help=TRUST_HELP),
) -> None:
    """Serve the episode driver at POST /run (task + policy + environment -> episode).

    Example: gymflow agent serve --policy models:/gymflow-tool_call@champion --workers 2
    """
    from gymflow.agent.serve import AgentServeOptions, serve
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.jsonl import InputFileError

    options = AgentServeOptions(
        host=host, port=port, workers=workers, token=token, insecure=insecure, policy=policy,
        tasks=tasks, trust_client_tasks=trust_client_tasks, max_live=max_live,
        episode_timeout_s=episode_timeout_s,
    )  # fmt: skip
    children_die_with_me()
    try:
        status = serve(options)
    except (GymflowError, InputFileError) as exc:
        fail_with(exc)
    raise typer.Exit(status)


@agent_app.command("proxy")
def agent_proxy(
    backend: str = typer.Option(..., help="The policy backend's OpenAI base URL (…/v1)."),
    backend_key_env: str = typer.Option(
        None, help="Environment variable holding the backend's bearer token."
    ),
    tasks: Path = typer.Option(
        None, help="Tasks episodes may name by id (gymflow JSONL or a .parquet task table)."
    ),
    out: Path = typer.Option(None, help="Write every ended episode as a rollout row here."),
    run_id: str = typer.Option(None, help="The rows' run id (default: a new one)."),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8767, help="Port."),
    token: str = typer.Option(
        None, envvar="GYMFLOW_AGENT_TOKEN", help="Require 'Authorization: Bearer TOKEN'."
    ),
    insecure: bool = typer.Option(False, help="Allow a non-loopback bind without a token."),
    max_episodes: int = typer.Option(1024, min=1, help="Episodes open at once."),
    episode_ttl_s: float = typer.Option(3600.0, help="An episode not ended by then is closed."),
    trust_client_tasks: bool = typer.Option(False, help=TRUST_HELP),
) -> None:
    """Serve the capturing proxy: agents point base_url at <proxy>/episodes/<id>/v1.

    Example: gymflow agent proxy --backend http://127.0.0.1:8000/v1 --out runs/proxied
    """
    import os

    import uvicorn

    from gymflow.agent.backend import Backend
    from gymflow.agent.proxy import build_proxy_app
    from gymflow.agent.proxy_store import ProxyStore
    from gymflow.agent.serve import read_task_file
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.ids import new_run_id
    from gymflow.core.jsonl import InputFileError
    from gymflow.env.serve import check_bind
    from gymflow.env.task_store import TaskStore

    try:
        check_bind(
            "the capturing proxy", host, token, insecure, "--token (or GYMFLOW_AGENT_TOKEN)",
            "open episodes and use the backend",
        )  # fmt: skip
        key = os.environ.get(backend_key_env) if backend_key_env else None
        held = read_task_file(tasks).values() if tasks else ()
        known = TaskStore(held, trust_client_tasks)
        store = ProxyStore(out, run_id or new_run_id(), f"proxy:{backend}") if out else None
    except (GymflowError, InputFileError) as exc:
        fail_with(exc)
    app = build_proxy_app(
        Backend(backend, key), known, store, token,
        max_episodes=max_episodes, episode_ttl_s=episode_ttl_s,
    )  # fmt: skip
    children_die_with_me()
    typer.echo(f"capturing proxy at http://{host}:{port} in front of {backend}")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@agent_app.command("collect")
def agent_collect(
    agent: list[str] = typer.Option(
        ..., help="Agent program FILE.py:FUNCTION or MODULE:FUNCTION (repeat for several)."
    ),
    backend: str = typer.Option(..., help="The policy backend's OpenAI base URL (…/v1)."),
    env: str = typer.Option(..., help="Environment that verifies the episodes."),
    tasks: Path = typer.Option(..., help="Tasks, JSONL in --format."),
    fmt: str = typer.Option("gymflow", "--format", help="Task format (as for gymflow verify)."),
    out: Path = typer.Option(..., help="Collection folder (rollouts/ + tasks.parquet)."),
    num_repeats: int = typer.Option(4, min=1, help="Episodes per task (a group)."),
    concurrency: int = typer.Option(8, min=1, help="Agent episodes at once."),
    run_id: str = typer.Option("agents", help="Names the collection; the same id resumes it."),
    seed: int = typer.Option(0, help="Base of every rollout's sampling seed."),
) -> None:
    """Run external agents on tasks through a capturing proxy; store their episodes.

    Example: gymflow agent collect --agent examples/agents/langgraph_agent.py:run
    --backend http://127.0.0.1:8000/v1 --env tool_call --tasks T.jsonl --out runs/agents
    """
    from gymflow.agent.backend import Backend
    from gymflow.agent.external import ExternalAgents
    from gymflow.agent.proxy import build_proxy_app
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.jsonl import InputFileError
    from gymflow.data.task_files import load_tasks
    from gymflow.env.loopback import LoopbackServer
    from gymflow.env.registry import get_env
    from gymflow.rollout.engine import CollectSettings, collect

    try:
        environment = get_env(env)
        task_list = list(load_tasks(environment, tasks, fmt).values())
        programs = ExternalAgents(agent, concurrency=concurrency)
    except (GymflowError, InputFileError) as exc:
        fail_with(exc)
    settings = CollectSettings(
        run_id=run_id, num_repeats=num_repeats, concurrency=concurrency, seed=seed,
        policy_spec=f"proxy:{backend}", reward_range=environment.reward_range,
    )  # fmt: skip
    children_die_with_me()
    with LoopbackServer(build_proxy_app(Backend(backend))) as proxy:
        programs.proxy_url = proxy.url
        try:
            report = collect(environment, None, task_list, out, settings, runner=programs)
        except GymflowError as exc:
            fail_with(exc)
        finally:
            programs.close()
    typer.echo(
        f"run {report.run_id}: {report.collected} collected, {report.already_on_disk} already on "
        f"disk, {report.unscored} without a reward, failures {report.failures}; "
        f"{report.rollouts_per_s} rollouts/s -> {out}"
    )
