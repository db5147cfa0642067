"""``gymflow ui``: the Prefect UI and the MLflow UI of this project, on 127.0.0.1, until Ctrl-C."""

from __future__ import annotations

import typer

from gymflow.cli.common import command_app

ui_app = command_app()


@ui_app.command("ui")
def ui(
    prefect_port: int = typer.Option(4200, min=1, max=65535, help="Port of the Prefect UI/API."),
    mlflow_port: int = typer.Option(5000, min=1, max=65535, help="Port of the MLflow UI."),
) -> None:
    """Serve this project's Prefect and MLflow UIs.

    The project is GYMFLOW_HOME or the current folder; both servers bind 127.0.0.1.

    Runs started later link to these addresses; Ctrl-C or SIGTERM stops both servers. To keep
    them running without a terminal, see `gymflow deploy --background`.

    Example: gymflow ui --prefect-port 4300 --mlflow-port 5050
    """
    import signal
    import threading

    from gymflow.cli.errors import error_line
    from gymflow.core.failures import GymflowError
    from gymflow.core.watchdog import start_watchdog
    from gymflow.lifecycle.home import project_home
    from gymflow.lifecycle.ui_links import mlflow_experiment_url, write_ui_addresses
    from gymflow.lifecycle.ui_servers import UIServers

    home = project_home()
    servers = UIServers(home, prefect_port=prefect_port, mlflow_port=mlflow_port)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    start_watchdog()  # a SIGKILL of this command takes both servers with it
    try:
        ready_s = servers.start()
    except GymflowError as exc:
        servers.stop()
        typer.echo(error_line(exc.kind, exc.detail), err=True)
        raise typer.Exit(1) from None
    write_ui_addresses(home, servers.prefect_url, servers.mlflow_url)
    typer.echo(f"Prefect UI: {servers.prefect_url}/runs")
    typer.echo(f"MLflow UI:  {mlflow_experiment_url(home, servers.experiment_id)}")
    typer.echo(
        f"both answering after {ready_s:.1f} s; project {home}; "
        f"PREFECT_API_URL={servers.prefect_url}/api; Ctrl-C stops both"
    )
    while not stop.wait(0.5):
        if (name := servers.dead()) is not None:
            servers.stop()
            tail = servers.log_tail(name, 3)
            typer.echo(error_line("internal_error", f"the {name} UI exited: {tail}"), err=True)
            raise typer.Exit(1)
    codes = servers.stop()
    typer.echo(f"stopped both UIs ({', '.join(f'{k} exit {v}' for k, v in codes.items())})")
