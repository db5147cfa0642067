"""``gymflow stack``: a team's servers on one box, and a check of the servers a machine uses.

``up``, ``status`` and ``down`` run PostgreSQL, the Prefect server, the MLflow server (with its
artifact store) and the workers from one settings file (:mod:`gymflow.stack`); ``env`` prints
the variables that point a machine at them; ``check`` says in one line per part what is wrong
with the servers this machine is pointed at, before any work.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import command_group

stack_app = command_group("A team's stack: PostgreSQL, Prefect and MLflow servers, workers.")
SETTINGS_OPTION = typer.Option(
    None, "--settings", help="The stack's settings file (default: <home>/stack.json)."
)


def _stack(settings: Path | None):
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.home import project_home
    from gymflow.stack.control import Stack
    from gymflow.stack.settings import read_settings

    home = project_home()
    try:
        return Stack(home, read_settings(settings, home))
    except GymflowError as exc:
        fail_with(exc)


@stack_app.command("up")
def stack_up(settings: Path = SETTINGS_OPTION) -> None:
    """Start PostgreSQL, the Prefect server, the MLflow server and the workers (what runs
    already is left alone); then print the variables a client sets.

    Example: MLFLOW_AUTH_ADMIN_PASSWORD=… gymflow stack up --settings team/stack.json
    """
    from gymflow.stack.control import up

    stack = _stack(settings)
    for line in up(stack):
        typer.echo(line)
    typer.echo("point a machine at it with:")
    _print_env(stack)


@stack_app.command("status")
def stack_status(settings: Path = SETTINGS_OPTION) -> None:
    """What runs, its pid, address and log; exit 1 unless every part runs and answers."""
    from gymflow.stack.control import status

    lines, ok = status(_stack(settings))
    for line in lines:
        typer.echo(line)
    raise typer.Exit(0 if ok else 1)


@stack_app.command("down")
def stack_down(settings: Path = SETTINGS_OPTION) -> None:
    """Stop the workers, the servers and PostgreSQL (data, artifacts and results stay)."""
    from gymflow.stack.control import down

    for line in down(_stack(settings)):
        typer.echo(line)


@stack_app.command("env")
def stack_env(settings: Path = SETTINGS_OPTION) -> None:
    """Print `export` lines pointing a shell at the stack: eval "$(gymflow stack env)"."""
    _print_env(_stack(settings))


def _print_env(stack) -> None:
    typer.echo(f"export MLFLOW_TRACKING_URI={stack.settings.mlflow_uri}")
    typer.echo(f"export PREFECT_API_URL={stack.settings.prefect_api}")
    typer.echo(
        f"export PREFECT_RESULTS_LOCAL_STORAGE_PATH={stack.settings.results_path(stack.home)}"
    )


@stack_app.command("check")
def stack_check(
    pool: str = typer.Option(None, "--pool", help="Also check that this work pool exists."),
) -> None:
    """Check the MLflow and Prefect servers this machine is pointed at (MLFLOW_TRACKING_URI,
    PREFECT_API_URL) and, with --pool, the work pool: one line per part, an error line with
    its kind for each problem; exit 1 if any.

    Example: gymflow stack check --pool gymflow
    """
    from gymflow.cli.errors import error_line
    from gymflow.lifecycle.home import project_home
    from gymflow.stack.check import check_all

    findings = check_all(project_home(), pool)
    for found in findings:
        if found.ok:
            typer.echo(f"ok: {found.line}")
        else:
            typer.echo(error_line(found.kind, found.line), err=True)
    raise typer.Exit(0 if all(f.ok for f in findings) else 1)
