"""Score given responses with an environment's verifier, no model involved (``gymflow verify``).

This is for checking a verifier against an external oracle: feed it tasks and the answers some
other system (or a person) produced, and compare the rewards it gives with the oracle's.

* **Tasks** (JSONL) are read by an *importer* chosen with ``--format``: ``gymflow`` (a
  :class:`~gymflow.core.task_record.Task` per line; a missing ``tools`` is filled with the
  environment's tool schemas) is built in, and an environment adds its own formats through
  :meth:`~gymflow.env.environment.Environment.importers`. An importer keeps the source's ids.
  One that needs files beside the tasks file (BFCL keeps its answers in ``possible_answer/``)
  has a ``for_file(path) -> Importer`` method, called once with the tasks file's path.
* **Responses** (JSONL) are rows ``{"task_id", "response": str}`` (final model text, parsed
  strictly like a rollout) or ``{"task_id", "output": [Responses items]}``, or NeMo Gym
  rollout rows (``response`` is the Responses object; its ``output`` items are scored, see
  :mod:`gymflow.data.nemo_gym`). A NeMo Gym row without ``task_id`` names its task by its prompt
  (``responses_create_params.input``), which must match exactly one task's.
* **Scores** (JSONL) are one row per response, in the same order: ``task_id``, ``reward``,
  ``reward_components``, ``failure_kind``, ``success``.

Bad *input* (a line that is not JSON or not UTF-8, an unknown ``task_id``, a row with neither
or both answer fields) raises :class:`InputFileError` naming the file, line and problem, and
nothing is written; a well-formed row whose *answer* is malformed is scored like any other.
The scores file is written to a temporary file and renamed, so it is complete or absent.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError, read_jsonl
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment

Importer = Callable[[dict], Task]
"""One JSON row of an external task file -> a Task (raises ValueError/KeyError/TypeError)."""

BUILTIN_IMPORTERS: dict[str, Callable[[dict, Environment], Task]] = {}
"""Formats every environment reads; add one with ``@builtin_importer("name")``."""


def builtin_importer(name: str) -> Callable[[Callable[[dict, Environment], Task]], Callable]:
    """Register ``fn(row, env) -> Task`` as the built-in task format ``name``."""

    def register(fn: Callable[[dict, Environment], Task]) -> Callable[[dict, Environment], Task]:
        BUILTIN_IMPORTERS[name] = fn
        return fn

    return register


@builtin_importer("gymflow")
def import_gymflow(row: dict, env: Environment) -> Task:
    """A ``Task`` as JSON (see ``environments/tool_call/examples/tasks.jsonl``)."""
    if "tools" not in row:
        row = {**row, "tools": env.tool_schemas}
    return Task.model_validate(row)


def importers(env: Environment) -> dict[str, Importer]:
    """Every task format ``env`` reads: the built-in ones, then the environment's own."""
    found: dict[str, Importer] = {
        name: partial(fn, env=env) for name, fn in BUILTIN_IMPORTERS.items()
    }
    found.update(env.importers())
    return found


def load_tasks(env: Environment, path: Path, fmt: str = "gymflow") -> dict[str, Task]:
    """Tasks by id, read with the importer ``fmt``; they must belong to ``env``, ids unique."""
    known = importers(env)
    if fmt not in known:
        raise InputFileError(
            path,
            None,
            f"unknown task format {fmt!r} for environment {env.name!r}; "
            f"known formats: {', '.join(sorted(known))}",
            FailureKind.BAD_REQUEST,
        )
    importer = known[fmt]
    if hasattr(importer, "for_file"):  # it reads files beside the tasks file
        importer = importer.for_file(Path(path))
    tasks: dict[str, Task] = {}
    first_line: dict[str, int] = {}
    for number, row in read_jsonl(path):
        try:
            task = importer(row)
        except ValidationError as exc:
            raise InputFileError(
                path,
                number,
                f"not a {fmt} task: {_validation_summary(exc)}",
                FailureKind.SCHEMA_VIOLATION,
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputFileError(
                path, number, f"not a {fmt} task: {problem}", FailureKind.SCHEMA_VIOLATION
            ) from None
        if not isinstance(task, Task):
            raise TypeError(f"importer {fmt!r} returned {type(task).__name__}, not a Task")
        if task.env != env.name:
            raise InputFileError(
                path,
                number,
                f"task {task.task_id!r} is for environment {task.env!r}, not {env.name!r}",
                FailureKind.SCHEMA_VIOLATION,
            )
        if task.task_id in tasks:
            raise InputFileError(
                path,
                number,
                f"duplicate task_id {task.task_id!r} (first on line {first_line[task.task_id]})",
                FailureKind.SCHEMA_VIOLATION,
            )
        tasks[task.task_id] = task
        first_line[task.task_id] = number
    return tasks


def _validation_summary(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "row"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first['msg']}{more}"
