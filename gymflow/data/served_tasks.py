"""The tasks a resources server holds: read from task files when ``gymflow env serve`` starts.

The server scores only against ground truth it loaded itself (:mod:`gymflow.env.task_store`).
It reads JSONL task files with the importer ``fmt`` (:func:`gymflow.data.task_files.load_tasks`:
``gymflow``, ``nemo_gym``, an environment's own format such as ``humaneval``) and Parquet task
tables (a run's ``data/tasks-<split>.parquet``, a collection's ``tasks.parquet``), of which
it keeps the rows of its environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError
from gymflow.core.task_record import Task
from gymflow.data.task_files import load_tasks
from gymflow.data.task_table import read_tasks
from gymflow.env.environment import Environment
from gymflow.env.task_store import TaskStore


def read_task_files(env: Environment, paths: Sequence[Path], fmt: str = "gymflow") -> list[Task]:
    """Every task of ``env`` in ``paths``; raises :class:`InputFileError` (one line) for a file
    that cannot be read or holds none of ``env``'s tasks."""
    tasks: list[Task] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise InputFileError(path, None, "no such task file", FailureKind.BAD_REQUEST)
        if path.suffix == ".parquet":
            found = [t for t in read_tasks(path) if t.env == env.name]
        else:
            found = list(load_tasks(env, path, fmt).values())
        if not found:
            raise InputFileError(
                path, None, f"holds no {env.name} task", FailureKind.SCHEMA_VIOLATION
            )
        tasks += found
    return tasks


def task_store(
    env: Environment, paths: Sequence[Path], fmt: str = "gymflow", trust_client_tasks: bool = False
) -> TaskStore:
    """The :class:`TaskStore` of a server started with these files (a repeated id with another
    ground truth is refused in one line)."""
    tasks = read_task_files(env, paths, fmt)
    try:
        return TaskStore(tasks, trust_client_tasks)
    except ValueError as exc:
        raise InputFileError(
            Path(paths[0]), None, str(exc), FailureKind.SCHEMA_VIOLATION
        ) from None
