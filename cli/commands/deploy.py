"""``gymflow deploy``: the lifecycle, evaluation and collection flows as scheduled deployments.

They are registered with the project's Prefect server (the one ``gymflow ui`` serves, or
``PREFECT_API_URL``) and served by this process until Ctrl-C (their schedules pause then).
"""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy)


def deploy(
    cron: str = typer.Option("0 3 * * *", help="Lifecycle schedule (cron, UTC)."),
    config: Path = typer.Option(None, help="JSON file of LifecycleConfig fields (the default's)."),
    smoke: bool = typer.Option(False, help="Schedule the --smoke budget instead of the default."),
    eval_cron: str = typer.Option(
        "0 5 * * *", help="Schedule of the champion's evaluation ('' for none)."
    ),
    collect_options: Path = typer.Option(
        None, help="JSON file of CollectOptions: also deploy the collection flow."
    ),
    collect_cron: str = typer.Option(None, help="Schedule of the collection (default: none)."),
    name: str = typer.Option("nightly", help="The lifecycle deployment's name."),
) -> None:
    """Register the deployments with the project's Prefect server and serve them."""
    import os

    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.home import configure_prefect, project_home

    home = project_home()
    configure_prefect(home)  # finds a running `gymflow ui` of this project
    if "PREFECT_API_URL" not in os.environ:
        typer.echo(
            "error: no Prefect server for this project: start `gymflow ui` first (deployments "
            "and their schedules live in a server), or set PREFECT_API_URL",
            err=True,
        )
        raise typer.Exit(2)
    from gymflow.deployments import lifecycle as deployments
    from gymflow.lifecycle.run_config import read_overrides, run_config

    try:
        overrides = read_overrides(config) if config is not None else None
        cfg = run_config(overrides=overrides, smoke=smoke)
        chosen = [deployments.lifecycle_deployment(cron or None, cfg, name)]
        chosen.append(deployments.evaluate_deployment(eval_cron or None, cfg.env))
        if collect_options is not None:
            options = _collect_options(collect_options)
            chosen.append(deployments.collect_deployment(collect_cron or None, options))
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"Prefect API {os.environ['PREFECT_API_URL']}; config digest {cfg.digest()}")
    for d in chosen:
        when = ", ".join(s.schedule.cron for s in d.schedules) if d.schedules else "on demand"
        typer.echo(f"deployment {d.flow_name}/{d.name}: {when}")
    from prefect import serve

    serve(*chosen, print_starting_message=False)


def _collect_options(path: Path) -> dict:
    from pydantic import ValidationError

    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.lifecycle.run_config import read_overrides
    from gymflow.rollout.collection import CollectOptions

    try:
        return CollectOptions.model_validate(read_overrides(path)).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg'].lower()}" for e in exc.errors()
        )
        raise GymflowError(FailureKind.BAD_CONFIG, f"{path}: {problems}") from None
