"""``gymflow deploy``: the lifecycle, evaluation and collection flows as scheduled deployments.

They are registered with the project's Prefect server (the one ``gymflow ui`` serves, or
``PREFECT_API_URL``) and served — their runs executed — by Prefect's runner
(:mod:`gymflow.deployments.serving`). Four ways to run it:

* in the foreground, beside a ``gymflow ui`` (Ctrl-C stops serving; the schedules stay active,
  and runs due meanwhile wait for the next ``gymflow deploy``);
* ``--background``: the Prefect server, the MLflow UI and the runner as detached processes
  with pid files and logs under ``<home>/.prefect/background/``
  (:mod:`gymflow.deployments.background`); ``--stop`` ends them;
* ``--systemd DIR``: unit files for systemd (:mod:`gymflow.deployments.systemd`);
* ``--status``: what serves the deployments, their schedules, next and latest runs;
* ``--pool NAME``: registered with a work pool of a team's Prefect server (``PREFECT_API_URL``)
  and returned at once; ``prefect worker start --pool NAME`` on any machine runs them.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from gymflow.cli.common import children_die_with_me, command_app, set_option

deploy_app = command_app()


@deploy_app.command("deploy")
def deploy(
    cron: str = typer.Option("0 3 * * *", help="Lifecycle schedule (cron, UTC; '' for none)."),
    config: Path = typer.Option(None, help="JSON file of LifecycleConfig fields (the default's)."),
    sets: list[str] = set_option(),
    smoke: bool = typer.Option(False, help="Schedule the --smoke budget instead of the default."),
    eval_cron: str = typer.Option(
        "0 5 * * *", help="Schedule of the champion's evaluation ('' for on demand)."
    ),
    collect_options: Path = typer.Option(
        None, help="JSON file of CollectOptions: also deploy the collection flow."
    ),
    collect_cron: str = typer.Option(None, help="Schedule of the collection (default: none)."),
    name: str = typer.Option("nightly", help="The lifecycle deployment's name."),
    background: bool = typer.Option(
        False,
        "--background",
        help="Start the Prefect server, the MLflow UI and the runner as detached processes "
        "(pid files and logs in <home>/.prefect/background/) and return.",
    ),
    status: bool = typer.Option(
        False, "--status", help="Show what serves the deployments, their schedules and runs."
    ),
    stop: bool = typer.Option(False, "--stop", help="Stop what --background started."),
    systemd: Path = typer.Option(
        None,
        "--systemd",
        metavar="DIR",
        help="Write systemd units for the UI and the deployments into DIR (e.g. "
        "~/.config/systemd/user) instead of running anything.",
    ),
    prefect_port: int = typer.Option(4200, help="--background/--systemd: the Prefect UI's port."),
    mlflow_port: int = typer.Option(5000, help="--background/--systemd: the MLflow UI's port."),
    wait: float = typer.Option(
        0, help="Wait up to this many seconds for the project's Prefect server to answer."
    ),
    pool: str = typer.Option(
        None,
        "--pool",
        help="Register the deployments with this process work pool of the Prefect server "
        "PREFECT_API_URL names, and return: workers (`prefect worker start --pool NAME`) run "
        "them; at most the limit of the pool's work queue 'training' of lifecycles run at once.",
    ),
) -> None:
    """Schedule the flows and keep them running.

    Registers the lifecycle (--cron), the champion's evaluation (--eval-cron) and, with
    --collect-options, a collection as deployments of the project's Prefect server, and runs
    their flow runs. Schedules stay active when this command stops: runs due meanwhile wait
    for the next `gymflow deploy`. Ctrl-C or SIGTERM stops it within 15 s even when the
    Prefect server is gone.

    Without a second terminal: --background starts `gymflow ui` (unless one is running) and
    this command as detached processes; --status shows them and the deployments' next and
    latest runs; --stop ends them. For a machine that reboots: --systemd DIR writes
    gymflow-ui.service and gymflow-deploy.service (then `systemctl --user daemon-reload &&
    systemctl --user enable --now gymflow-ui gymflow-deploy`, and `loginctl enable-linger`
    to start them at boot).

    For a team: --pool NAME registers them with a work pool of the Prefect server
    PREFECT_API_URL names (`gymflow stack up` makes one) and returns; workers on any machine
    run them.

    Example: gymflow deploy --background --cron "0 3 * * *" --set grpo.time_budget_s=900
    """
    from gymflow.cli.errors import fail
    from gymflow.lifecycle.home import configure_prefect, project_home

    home = project_home()
    if sum((background, status, stop, systemd is not None, pool is not None)) > 1:
        fail("bad_request", "choose one of --background, --status, --stop, --systemd, --pool")
    if stop:
        _stop(home)
        return
    configure_prefect(home)  # finds a running `gymflow ui` of this project
    _find_server(home)
    if status:
        raise typer.Exit(_status(home))
    chosen = _deployments(
        config, sets, smoke, cron, eval_cron, collect_options, collect_cron, name, pool
    )
    if pool is not None:
        _to_pool(chosen, pool)
        return
    forwarded = _forwarded(
        config, sets, smoke, cron, eval_cron, collect_options, collect_cron, name
    )
    ports = ["--prefect-port", str(prefect_port), "--mlflow-port", str(mlflow_port)]
    if systemd is not None:
        _systemd(systemd, home, ports, [*forwarded, "--wait", "300"])
    elif background:
        _background(home, ports, forwarded, [d.name for d in chosen])
    else:
        _foreground(home, chosen, wait)


def _deployments(
    config, sets, smoke, cron, eval_cron, collect_options, collect_cron, name, pool=None
):
    """The deployments asked for; one ``bad_config`` line before anything starts."""
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.deployments import lifecycle as deployments
    from gymflow.lifecycle.run_config import parse_sets, read_overrides, run_config

    try:
        overrides = read_overrides(config) if config is not None else None
        cfg = run_config(overrides=overrides, smoke=smoke, sets=parse_sets(sets))
        chosen = [deployments.lifecycle_deployment(cron or None, cfg, name, pool=pool)]
        chosen.append(deployments.evaluate_deployment(eval_cron or None, cfg.env, pool=pool))
        if collect_options is not None:
            options = _collect_options(collect_options)
            chosen.append(deployments.collect_deployment(collect_cron or None, options, pool=pool))
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(f"config digest {cfg.digest()}")
    for d in chosen:
        when = ", ".join(s.schedule.cron for s in d.schedules) if d.schedules else "on demand"
        typer.echo(f"deployment {d.flow_name}/{d.name}: {when}")
    return chosen


def _forwarded(config, sets, smoke, cron, eval_cron, collect_options, collect_cron, name):
    """These options as arguments of a ``gymflow deploy`` started elsewhere (files absolute)."""
    args = ["--cron", cron, "--eval-cron", eval_cron, "--name", name]
    args += ["--config", str(config.resolve())] if config is not None else []
    args += [arg for item in sets for arg in ("--set", item)]
    args += ["--smoke"] if smoke else []
    args += ["--collect-options", str(collect_options.resolve())] if collect_options else []
    args += ["--collect-cron", collect_cron] if collect_cron is not None else []
    return args


def _to_pool(chosen: list, pool: str) -> None:
    """Register with the pool of the server ``PREFECT_API_URL`` names (checked first)."""
    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.prefect_server import check_prefect
    from gymflow.deployments.lifecycle import register_with_pool

    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        fail(
            "bad_request",
            "--pool needs a Prefect server: set PREFECT_API_URL (gymflow stack env prints it)",
        )
    try:
        check_prefect(api_url)
        for line in register_with_pool(chosen, pool):
            typer.echo(line)
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(
        f"workers run them: prefect worker start --pool {pool} (gymflow stack up starts one)"
    )


def _foreground(home: Path, chosen: list, wait: float) -> None:
    import time

    from gymflow.cli.errors import fail
    from gymflow.deployments import background

    deadline = time.monotonic() + wait
    while "PREFECT_API_URL" not in os.environ:
        _find_server(home)
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    if "PREFECT_API_URL" not in os.environ:
        fail(
            "bad_request",
            "no Prefect server for this project: `gymflow deploy --background` starts one "
            "and keeps serving, or start `gymflow ui` first, or set PREFECT_API_URL",
        )
    from gymflow.deployments.serving import serve_until_stopped

    api_url = os.environ["PREFECT_API_URL"]
    typer.echo(f"serving on Prefect API {api_url}; Ctrl-C stops (the schedules stay active)")
    children_die_with_me()
    pid = os.getpid()
    background.write_pid(home, "serve", pid)
    try:
        code = serve_until_stopped(chosen, api_url)
    finally:
        background.forget_pid(home, "serve", pid)
    typer.echo("stopped serving")
    raise typer.Exit(code)


def _find_server(home: Path) -> None:
    """Set ``PREFECT_API_URL`` to the project's ``gymflow ui`` server if it answers (a patient
    check: a loaded machine's server may take seconds to answer ``/health``)."""
    from gymflow.deployments import background
    from gymflow.lifecycle.home import use_project_server

    use_project_server(home)
    url = background.ui_json(home).get("prefect")
    if "PREFECT_API_URL" not in os.environ and url and background.answers(f"{url}/api"):
        os.environ["PREFECT_API_URL"] = f"{url}/api"


def _background(home: Path, ports: list[str], forwarded: list[str], names: list[str]) -> None:
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.deployments import background
    from gymflow.deployments.status import api

    env = dict(os.environ)
    try:
        api_url = os.environ.get("PREFECT_API_URL")
        if api_url is None:
            ui = background.start(home, "ui", ["ui", *ports], env)
            url = f"http://127.0.0.1:{ports[1]}/api"
            background.wait_until(lambda: background.answers(url), ui, 300, "Prefect API")
            api_url = url
            typer.echo(f"ui: pid {ui.pid} serves {url.removesuffix('/api')} (log {ui.log})")
        else:
            typer.echo(f"ui: using the Prefect server already running at {api_url}")
        serve = background.start(
            home, "serve", ["deploy", *forwarded], env | {"PREFECT_API_URL": api_url}
        )

        def registered() -> bool:
            found = {d["name"] for d in api(f"{api_url}/deployments/filter", {})}
            return set(names) <= found

        background.wait_until(registered, serve, 300, "deployments registered")
    except GymflowError as exc:
        fail_with(exc, 1)
    typer.echo(f"serve: pid {serve.pid} runs the deployments' flow runs (log {serve.log})")
    typer.echo("`gymflow deploy --status` shows them; `gymflow deploy --stop` stops both")


def _status(home: Path) -> int:
    from gymflow.deployments import background
    from gymflow.deployments.status import deployment_lines

    serving = False
    for name in reversed(background.NAMES):
        proc = background.process(home, name)
        typer.echo(proc.describe())
        serving = serving or (name == "serve" and proc.alive)
    api_url = os.environ.get("PREFECT_API_URL")
    if api_url is None or not background.answers(api_url):
        typer.echo(f"no Prefect server answers for {home} (gymflow deploy --background starts one)")
        return 1
    typer.echo(f"Prefect API {api_url}")
    for line in deployment_lines(api_url):
        typer.echo(line)
    if not serving:
        typer.echo("nothing serves these deployments now: their runs wait until `gymflow deploy`")
    return 0 if serving else 1


def _stop(home: Path) -> None:
    from gymflow.deployments import background

    said = background.stop(home)
    for line in said or [f"nothing started by gymflow deploy --background in {home}"]:
        typer.echo(line)


def _systemd(folder: Path, home: Path, ui_args: list[str], deploy_args: list[str]) -> None:
    from gymflow.deployments.systemd import write_units

    for path in write_units(folder, home, ui_args, deploy_args):
        typer.echo(f"wrote {path}")
    typer.echo(
        "then: systemctl --user daemon-reload && systemctl --user enable --now gymflow-ui "
        "gymflow-deploy (loginctl enable-linger $USER starts them at boot)"
    )


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
