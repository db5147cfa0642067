"""``gymflow env``: list the environments, hold one to its contract, serve it, scaffold a new one."""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import children_die_with_me, command_group

env_app = command_group("Environments: list, check, serve, scaffold a new one.")


@env_app.command("list")
def env_list() -> None:
    """List the environments: name, version, tools, turns and where each comes from (in-repo,
    a project folder on disk, an installed package); one whose code is gone says so."""
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.env.registry import env_source, get_env, list_envs

    try:
        names = list_envs()
    except GymflowError as exc:  # two environments with one name
        fail_with(exc, 1)
    broken = 0
    for name in names:
        try:
            env = get_env(name)
        except GymflowError as exc:  # a plugin whose code is gone or fails to import
            broken += 1
            typer.echo(f"{name}	missing	{exc.detail}")
            continue
        typer.echo(
            f"{name}	v{env.version}	{len(env.tool_specs)} tools	"
            f"max_turns={env.max_turns}	{env_source(name)}"
        )
    if broken:
        raise typer.Exit(1)


@env_app.command("check")
def env_check(
    name: str = typer.Argument(..., help="The environment (see `gymflow env list`)."),
    n: int = typer.Option(200, help="Generated tasks to check."),
) -> None:
    """Every gold episode scores 1.0 and every adversarial probe scores at most its ceiling.

    Example: gymflow env check counter --n 50
    """
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.env.registry import get_env
    from gymflow.rollout.env_check import check_environment

    try:
        env = get_env(name)
    except GymflowError as exc:  # unknown name (the message lists the known ones)
        fail_with(exc)
    try:
        golds, probes, problems = check_environment(env, n)
    except GymflowError as exc:  # e.g. a judge environment with no judge configured
        fail_with(exc, 1)
    typer.echo(f"{name}: {golds} gold episodes, {probes} probes, {len(problems)} problems")
    for line in problems[:20]:
        typer.echo(f"  {line}")
    if problems:
        raise typer.Exit(1)


@env_app.command("new")
def env_new(
    name: str = typer.Argument(..., help="The new environment's name (a Python package name)."),
    directory: Path = typer.Option(None, "--dir", help="Where to write it (default: ./NAME)."),
    kind: str = typer.Option(
        "tools", help="tools (a task with a tool and session state) or text (a plain-text answer)."
    ),
    install: bool = typer.Option(
        False,
        help="Also pip install it (editable) into gymflow's Python. Not needed: gymflow finds "
        "projects in its home and in GYMFLOW_ENV_PATH.",
    ),
) -> None:
    """Scaffold an environment project that passes `gymflow env check` as written.

    It holds a seeded generator, a pure verifier, the answer's format check (well_formed),
    probes, examples, tests and a README (with --kind tools also a tool with session state).
    Nothing is installed: gymflow finds the project by its pyproject.toml entry point in its
    home's sub-folders and in GYMFLOW_ENV_PATH, so `gymflow env check NAME` and `gymflow run
    --smoke --set env=NAME` work at once and edits take effect. Walkthrough:
    docs/how-to/new-environment.md.

    Example: gymflow env new word_rev --kind text && gymflow env check word_rev
    """
    from gymflow.cli.env_scaffold import new_environment
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError

    folder = directory or Path(name)
    try:
        made = new_environment(name, folder, install, kind)
    except GymflowError as exc:
        fail_with(exc, 1 if exc.kind == "internal_error" else 2)
    typer.echo(f"{name}: {len(made.files)} files in {folder.resolve()}")
    for path in made.files:
        typer.echo(f"  {path.relative_to(folder)}")
    typer.echo(f"{name}: {made.found_by}")
    typer.echo(f"next: gymflow env check {name}; gymflow run --smoke --set env={name}")


@env_app.command("serve")
def env_serve(
    name: str = typer.Argument(..., help="The environment (see `gymflow env list`)."),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8765, help="Port (workers use port … port+N-1)."),
    workers: int = typer.Option(1, min=1, help="Processes; sessions stick to their worker."),
    token: str = typer.Option(
        None, envvar="GYMFLOW_ENV_TOKEN", help="Require 'Authorization: Bearer TOKEN'."
    ),
    insecure: bool = typer.Option(
        False, help="Allow a non-loopback bind without a token (anyone may call the tools)."
    ),
    client_session_ids: bool = typer.Option(
        False,
        help="Let clients choose session ids (1-128 chars of [A-Za-z0-9_.:-]); by default "
        "the server issues random ones.",
    ),
    ray: int = typer.Option(
        0, min=0, help="Replicas as Ray actors (ports port … port+N-1) instead of --workers."
    ),
    ray_address: str = typer.Option(
        None,
        help="With --ray or --verify-on ray: a running Ray cluster (default: a local one "
        "started here).",
    ),
    verify_on: str = typer.Option(
        "local", help="Heavy verifiers (math, code) run in a local process pool or on Ray actors."
    ),
    verify_workers: int = typer.Option(
        None, min=1, help="Verify processes (or Ray actors) per worker (default: cores, <= 4)."
    ),
    tasks: list[Path] = typer.Option(
        None,
        "--tasks",
        help="Task files whose ground truth the server scores against (JSONL, see --format, "
        "or Parquet task tables such as a run's data/tasks-*.parquet); repeatable. Clients "
        "seed sessions by task_id.",
    ),
    fmt: str = typer.Option(
        "gymflow", "--format", help="JSONL task format: gymflow, nemo_gym, or the env's own."
    ),
    trust_client_tasks: bool = typer.Option(
        False,
        help="Score tasks clients send as they are (their ground truth, hidden tests "
        "included); by default only --tasks are scored.",
    ),
    insecure_sandbox: bool = typer.Option(
        False,
        help="Run model-written code (code) even with neither bubblewrap nor Landlock: an "
        "in-process guard and rlimits only.",
    ),
) -> None:
    """Serve an environment's resources server over HTTP.

    Example: gymflow env serve code --tasks environments/code/examples/tasks.jsonl
    """
    import os

    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.data.served_tasks import task_store
    from gymflow.env.registry import get_env
    from gymflow.env.serve import VerifyOn, serve

    if insecure_sandbox:
        from gymflow.environments.code.kernel_layer import INSECURE_ENV

        os.environ[INSECURE_ENV] = "1"  # read by the code sandbox in every worker
    try:
        environment = get_env(name)  # fail here, in one line, rather than in every worker
        store = task_store(environment, tasks or [], fmt, trust_client_tasks)
    except GymflowError as exc:
        fail_with(exc)
    if ray and verify_on != "local":
        fail_with(
            GymflowError(
                FailureKind.BAD_REQUEST,
                "--verify-on ray is for --workers servers: --ray replicas verify in a "
                "process pool on their own node",
            )
        )
    if not tasks and not trust_client_tasks:
        typer.echo(
            "warning: no --tasks: this server holds no tasks, so it refuses every session a "
            "client asks for; give --tasks FILE (e.g. the environment's examples/tasks.jsonl) "
            "or --trust-client-tasks",
            err=True,
        )
    children_die_with_me()
    try:
        if ray:
            from gymflow.env.ray_replicas import serve_on_ray

            status = serve_on_ray(
                name, host, port, ray, token, insecure, client_session_ids, ray_address,
                tasks=store,
            )  # fmt: skip
        else:
            verify = VerifyOn(verify_on, verify_workers, ray_address)
            status = serve(
                name, host, port, workers, token, insecure, client_session_ids, verify, store
            )
    except GymflowError as exc:
        fail_with(exc)
    raise typer.Exit(status)
