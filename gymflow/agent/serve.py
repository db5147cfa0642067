"""``gymflow agent serve``: the agent server over HTTP, in one or more processes.

As ``gymflow env serve`` (:mod:`gymflow.env.serve`, whose bind check and signal handling this
reuses): loopback by default, a bearer token (``--token`` or ``GYMFLOW_AGENT_TOKEN``) required
off loopback unless ``--insecure``; ``workers=N`` starts N uvicorn processes on ports ``port`` …
``port+N-1``, each listing all N in ``/health`` so :class:`~gymflow.agent.client.AgentClient`
spreads episodes over them. Each process loads its own copy of the policies it is asked for.
Like a resources server it scores only the ground truth it holds (``--tasks FILE``; requests
name a task by id or send one equal to its copy) unless ``--trust-client-tasks``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.serve import check_bind, supervise, worker_urls
from gymflow.env.task_store import TaskStore


@dataclass(frozen=True)
class AgentServeOptions:
    host: str = "127.0.0.1"
    port: int = 8766
    workers: int = 1
    token: str | None = None
    insecure: bool = False
    policy: str | None = None
    """Preloaded at start and used by requests that name no policy."""
    tasks: Path | None = None
    """A task file (gymflow JSONL, or a .parquet task table): the tasks it scores."""
    trust_client_tasks: bool = False
    """Also score tasks requests send that it does not hold (their ground truth as sent)."""
    max_live: int = 256
    episode_timeout_s: float = 600.0
    env_token: str | None = None
    """Bearer token for resources servers given by URL (default: ``GYMFLOW_ENV_TOKEN``)."""


def read_task_file(path: Path) -> dict[str, Task]:
    """Tasks by id from a ``.parquet`` task table or a JSONL file of task records."""
    from pydantic import ValidationError

    from gymflow.core.jsonl import read_jsonl, row_error

    path = Path(path)
    if path.suffix == ".parquet":
        from gymflow.data.task_table import read_tasks

        return {t.task_id: t for t in read_tasks(path)}
    tasks: dict[str, Task] = {}
    for line, row in read_jsonl(path):
        try:
            task = Task.model_validate(row)
        except ValidationError as exc:
            raise row_error(path, line, f"not a task record: {exc.errors()[0]['msg']}") from None
        if task.task_id in tasks:
            raise row_error(path, line, f"duplicate task_id {task.task_id!r}")
        tasks[task.task_id] = task
    return tasks


def worker_app(options: AgentServeOptions, urls: list[str]):
    """The agent server of one worker process (its policy loaded before it takes requests)."""
    from gymflow.agent.runtime import EpisodeRuntime, policy_spec
    from gymflow.agent.server import build_agent_app

    runtime = EpisodeRuntime(env_token=options.env_token)
    held = read_task_file(options.tasks).values() if options.tasks else ()
    tasks = TaskStore(held, options.trust_client_tasks)
    if options.policy:
        runtime.preload(policy_spec(options.policy))
    return build_agent_app(
        options.policy, tasks, options.token, options.max_live,
        episode_timeout_s=options.episode_timeout_s, runtime=runtime, workers=urls,
    )  # fmt: skip


def _run_worker(options: AgentServeOptions, index: int, urls: list[str]) -> None:
    import uvicorn

    app = worker_app(options, urls)
    uvicorn.run(
        app, host=options.host, port=options.port + index, log_level="warning", access_log=False
    )


def serve(options: AgentServeOptions) -> int:
    """Serve until interrupted; returns an exit status."""
    if options.workers < 1:
        raise GymflowError(FailureKind.BAD_REQUEST, "--workers must be at least 1")
    check_bind(
        "the agent server", options.host, options.token, options.insecure,
        "--token (or GYMFLOW_AGENT_TOKEN)", "run episodes with any policy it can load",
    )  # fmt: skip
    if options.tasks is not None:
        read_task_file(options.tasks)  # a bad file fails here, in one line
    urls = worker_urls(options.host, options.port, options.workers)
    print(f"agent server on {', '.join(urls)}", file=sys.stderr, flush=True)
    if options.workers == 1:
        _run_worker(options, 0, urls)
        return 0
    return supervise(_run_worker, [(options, k, urls) for k in range(options.workers)])
