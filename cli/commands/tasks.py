"""``gymflow tasks import-traces``: logged trajectories into evaluation tasks, failures first.

See :mod:`gymflow.data.trace_import` for the trace shapes read. The tasks are written as
gymflow task JSONL, ready for ``gymflow eval --tasks`` and the run config's
``task_data.heldout_files``. Bad input is one line with its kind, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import typer

tasks_app = typer.Typer(help="Task data: import production traces as evaluation tasks.")


@tasks_app.command("import-traces")
def import_traces_command(
    file: Path = typer.Argument(..., help="Trace JSONL: Responses items, chat messages or NeMo Gym rollout rows."),
    env: str = typer.Option(..., "--env", help="Environment the tasks are for."),
    out: Path = typer.Option(..., "--out", help="Tasks JSONL to write (gymflow task rows)."),
    existing: list[Path] = typer.Option(
        [], "--existing",
        help="Tasks to dedup against: a task JSONL or Parquet file, or a run folder (its data/ "
        "splits). Repeatable.",
    ),
    failures_only: bool = typer.Option(False, "--failures-only", help="Keep failed traces only."),
    threshold: float = typer.Option(0.8, help="Near-duplicate Jaccard threshold (0.5-1)."),
) -> None:  # fmt: skip
    """Turn logged trajectories into held-out tasks for ENV (failures first, no repeats)."""
    from pydantic import ValidationError

    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.core.jsonl import write_jsonl_atomic
    from gymflow.data.dedup import NearDupSettings
    from gymflow.data.trace_import import import_traces
    from gymflow.env.registry import get_env

    try:
        settings = NearDupSettings(threshold=threshold)
        environment = get_env(env)
        known = [t for path in existing for t in _existing_tasks(environment, path)]
        result = import_traces(environment, file, known, settings, failures_only)
        write_jsonl_atomic(out, [t.model_dump() for t in result.tasks])
    except ValidationError as exc:
        typer.echo(
            f"error: [{FailureKind.BAD_REQUEST}] --threshold: {exc.errors()[0]['msg']}", err=True
        )
        raise typer.Exit(2) from None
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    c = result.counts
    typer.echo(
        f"{c['kept']} tasks -> {out} ({c['failure']} failed, {c['unknown']} unknown, "
        f"{c['success']} succeeded traces of {c['rows']}; dropped {c['near_existing']} near "
        f"existing tasks and {c['repeats']} repeats)"
    )  # fmt: skip


def _existing_tasks(env, path: Path) -> list:
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.data.task_files import load_tasks
    from gymflow.data.task_table import read_tasks

    if path.is_dir():
        return [t for part in sorted(path.glob("data/tasks-*.parquet")) for t in read_tasks(part)]
    if path.suffix == ".parquet":
        return read_tasks(path)
    if path.exists():
        return list(load_tasks(env, path).values())
    raise GymflowError(FailureKind.BAD_REQUEST, f"--existing {path}: no such file or folder")


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
