"""``gymflow run``: the whole lifecycle, with progress while it works and the table at the end.

The config is the default (or ``--smoke``), a resumed run's saved one (``--run ID``), with
``--config FILE`` and ``--set KEY=VALUE`` on top (:mod:`gymflow.lifecycle.run_config`); a wrong
one is one ``bad_config`` line before any work. While the run works it shows each stage, the
trainers' steps and the evaluations' episodes with an ETA (:mod:`gymflow.core.progress`): a bar
on a terminal, a line at least every 10 s in a log, nothing with ``--quiet``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from gymflow.cli.common import (
    children_die_with_me,
    command_app,
    hidden_run_id_option,
    one_of,
    quiet_option,
    run_option,
    set_option,
    show_progress,
)
from gymflow.cli.interrupted import end_interrupted, stop_quietly_on_interrupt
from gymflow.cli.supervise import can_supervise, run_supervised

run_app = command_app()


@run_app.command("run")
def run_command(
    out: Path = typer.Option(None, help="Folder for run folders (default: <home>/runs)."),
    run: str = run_option("Resume this run (re-runs only unfinished stages); default: a new id."),
    run_id: str = hidden_run_id_option(),
    config: Path = typer.Option(None, help="JSON file with LifecycleConfig fields to override."),
    sets: list[str] = set_option(),
    smoke: bool = typer.Option(False, help="Reduced budget that still runs every stage (minutes)."),
    seed: int = typer.Option(None, help="Seed for demos, training and sampling."),
    quiet: bool = quiet_option(),
) -> None:
    """Run the whole lifecycle: data, SFT, GRPO, gate, registry.

    The embedded default builds a tiny model here and teaches it on CPU; --config and --set
    change any setting (see `gymflow config show`). Progress goes to stdout: a bar on a
    terminal, a line at least every 10 s otherwise; the table comes at the end.

    Example: gymflow run --smoke --set grpo.max_steps=5
    """
    start_run(out, one_of(run, run_id, "--run"), config, sets, smoke, seed, quiet)


def start_run(
    out: Path | None,
    run_id: str | None,
    config: Path | None,
    sets: list[str],
    smoke: bool,
    seed: int | None,
    quiet: bool,
) -> None:
    """What ``gymflow run`` and ``gymflow rerun`` do: resolve the config, run, print the table."""
    show_progress(quiet)
    from gymflow.lifecycle.home import configure_prefect, project_home

    home = project_home()
    fresh_home = not (home / ".prefect").exists()  # a refused config leaves nothing behind
    configure_prefect(home)
    from gymflow.cli.errors import error_line, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.prefect_server import check_prefect

    if api_url := os.environ.get("PREFECT_API_URL"):  # a server's: one line if it is not usable
        try:
            check_prefect(api_url)
        except GymflowError as exc:
            fail_with(exc, 1)
    from gymflow.core import progress
    from gymflow.core.ids import new_run_id
    from gymflow.lifecycle.run_config import parse_sets, read_overrides, run_config
    from gymflow.lifecycle.run_context import open_run
    from gymflow.lifecycle.summary import render_table

    run_id = run_id or new_run_id()
    run_dir = ((out or home / "runs") / run_id).resolve()
    saved = run_dir / "config.json"
    try:
        overrides = read_overrides(config) if config is not None else None
        cfg = run_config(saved, overrides, smoke, seed, parse_sets(sets))
    except GymflowError as exc:
        if fresh_home:
            import shutil

            shutil.rmtree(home / ".prefect", ignore_errors=True)
        fail_with(exc)
    if can_supervise():  # the run works in a child of its own session: Ctrl-C stops it fast
        given = run_id in sys.argv[1:]
        raise typer.Exit(
            run_supervised(sys.argv[1:] + ([] if given else ["--run", run_id]), run_id)
        )
    stop_quietly_on_interrupt()
    if saved.exists():
        changed = " with the changes asked for" if overrides or sets or seed is not None else ""
        ignored = " (--smoke applies to new runs only)" if smoke else ""
        progress.note(f"resuming run {run_id} with its saved config{changed}{ignored}")
    children_die_with_me()
    progress.note(f"run {run_id}: folder {run_dir}")
    whole = progress.open_tracker("run", unit="stage")  # speaks while no stage does
    whole.update(now="opening the MLflow store")
    ctx = open_run(home, run_dir, cfg)
    whole.update(now="starting Prefect")
    from gymflow.flows.lifecycle import lifecycle

    resume = f"gymflow rerun {run_id}" + (f" --out {out}" if out is not None else "")
    try:
        summary = lifecycle(ctx, cfg)
    except KeyboardInterrupt:  # the supervising command says so and how to resume
        end_interrupted()
    except GymflowError as exc:
        typer.echo(error_line(exc.kind, f"run {run_id} stopped: {exc.detail}"), err=True)
        typer.echo(
            f"fix the cause and resume with: {resume} (--config FIX.json or --set KEY=VALUE "
            "change settings of the saved config)",
            err=True,
        )
        raise typer.Exit(1) from None
    except Exception as exc:
        message = f"run {run_id} failed: {type(exc).__name__}: {exc}"
        typer.echo(error_line("internal_error", message), err=True)
        typer.echo(f"resume with: {resume}", err=True)
        raise typer.Exit(1) from None
    finally:
        whole.close()
        progress.close_all()  # a failed stage may have left its tracker open
    typer.echo(render_table(summary))
    if quiet:
        return
    typer.echo(f"summary: {run_dir / 'summary.json'}, report: {run_dir / 'report.md'}")
    links = summary.get("links", {})
    for label, key in (("Prefect flow run", "prefect"), ("MLflow run", "mlflow")):
        if key in links:
            typer.echo(f"{label}: {links[key]}  (serve both UIs with `gymflow ui`)")
