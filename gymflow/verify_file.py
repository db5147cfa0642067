"""Score given responses with an environment's verifier, no model involved (``gymflow verify``).

This is for checking a verifier against an external oracle: feed it tasks and the answers some
other system (or a person) produced, and compare the rewards it gives with the oracle's.

* **Tasks** (JSONL) are read by an *importer* chosen with ``--format``: ``gymflow`` (a
  :class:`~gymflow.task_record.Task` per line; a missing ``tools`` is filled with the
  environment's tool schemas) is built in, and an environment adds its own formats through
  :meth:`~gymflow.environment.Environment.importers`. An importer keeps the source's ids.
  One that needs files beside the tasks file (BFCL keeps its answers in ``possible_answer/``)
  has a ``for_file(path) -> Importer`` method, called once with the tasks file's path.
* **Responses** (JSONL) are rows ``{"task_id", "response": str}`` (final model text, parsed
  strictly like a rollout) or ``{"task_id", "output": [Responses items]}``, or NeMo Gym
  rollout rows (``response`` is the Responses object; its ``output`` items are scored, see
  :mod:`gymflow.nemo_gym`). A NeMo Gym row without ``task_id`` names its task by its prompt
  (``responses_create_params.input``), which must match exactly one task's.
* **Scores** (JSONL) are one row per response, in the same order: ``task_id``, ``reward``,
  ``reward_components``, ``failure_kind``, ``success``.

Bad *input* (a line that is not JSON or not UTF-8, an unknown ``task_id``, a row with neither
or both answer fields) raises :class:`VerifyInputError` naming the file, line and problem, and
nothing is written; a well-formed row whose *answer* is malformed is scored like any other.
The scores file is written to a temporary file and renamed, so it is complete or absent.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from gymflow.environment import Environment
from gymflow.failures import FailureKind, GymflowError
from gymflow.task_record import Task
from gymflow.trajectory import assistant_items, prompt_items

Importer = Callable[[dict], Task]
"""One JSON row of an external task file -> a Task (raises ValueError/KeyError/TypeError)."""

BUILTIN_IMPORTERS: dict[str, Callable[[dict, Environment], Task]] = {}
"""Formats every environment reads; add one with ``@builtin_importer("name")``."""


class VerifyInputError(GymflowError):
    """Bad input to ``gymflow verify``; ``detail`` is one line naming the file and line."""

    def __init__(self, path: Path | str, line: int | None, problem: str, kind: FailureKind):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(kind, f"{where}: {_one_line(problem)}")
        self._args = (path, line, problem, kind)

    def __reduce__(self):
        return (type(self), self._args)


class VerifierCrash(RuntimeError):
    """The environment's verifier raised on a well-formed row (a verifier bug, not bad input)."""


@dataclass(frozen=True)
class ResponseRow:
    """One row of the responses file: its line number, task and assistant items (no prompt)."""

    line: int
    task_id: str
    items: list[dict]


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


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` per non-blank line; every defect raises VerifyInputError."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise VerifyInputError(
            path, None, f"cannot read: {exc.strerror or exc}", FailureKind.CORRUPT_FILE
        ) from None
    if raw[:2] == b"\x1f\x8b":  # gzip (HumanEval ships its tasks as .jsonl.gz)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise VerifyInputError(
                path, None, f"not a readable gzip file: {exc}", FailureKind.CORRUPT_FILE
            ) from None
    for number, data in enumerate(raw.split(b"\n"), start=1):
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte-order mark
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 1].hex()
            raise VerifyInputError(
                path,
                number,
                f"not UTF-8 (byte 0x{bad} at column {exc.start + 1})",
                FailureKind.NOT_UTF8,
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VerifyInputError(
                path,
                number,
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                FailureKind.CORRUPT_FILE,
            ) from None
        except (ValueError, RecursionError) as exc:
            raise VerifyInputError(
                path, number, f"not valid JSON ({exc})", FailureKind.CORRUPT_FILE
            ) from None
        if not isinstance(obj, dict):
            raise VerifyInputError(
                path,
                number,
                f"expected a JSON object, got {type(obj).__name__}",
                FailureKind.SCHEMA_VIOLATION,
            )
        yield number, obj


def load_tasks(env: Environment, path: Path, fmt: str = "gymflow") -> dict[str, Task]:
    """Tasks by id, read with the importer ``fmt``; they must belong to ``env``, ids unique."""
    known = importers(env)
    if fmt not in known:
        raise VerifyInputError(
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
            raise VerifyInputError(
                path,
                number,
                f"not a {fmt} task: {_validation_summary(exc)}",
                FailureKind.SCHEMA_VIOLATION,
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise VerifyInputError(
                path, number, f"not a {fmt} task: {problem}", FailureKind.SCHEMA_VIOLATION
            ) from None
        if not isinstance(task, Task):
            raise TypeError(f"importer {fmt!r} returned {type(task).__name__}, not a Task")
        if task.env != env.name:
            raise VerifyInputError(
                path,
                number,
                f"task {task.task_id!r} is for environment {task.env!r}, not {env.name!r}",
                FailureKind.SCHEMA_VIOLATION,
            )
        if task.task_id in tasks:
            raise VerifyInputError(
                path,
                number,
                f"duplicate task_id {task.task_id!r} (first on line {first_line[task.task_id]})",
                FailureKind.SCHEMA_VIOLATION,
            )
        tasks[task.task_id] = task
        first_line[task.task_id] = number
    return tasks


def load_responses(path: Path, tasks: dict[str, Task]) -> list[ResponseRow]:
    """Response rows in file order; each names a known task and has ``response`` xor ``output``.

    A NeMo Gym rollout row (``response`` is an object) may name its task by its prompt instead.
    """
    rows: list[ResponseRow] = []
    by_prompt: dict[str, list[str]] = {}
    for number, row in read_jsonl(path):
        bad = partial(_row_error, path, number)
        has_response, has_output = "response" in row, "output" in row
        if has_response == has_output:
            which = "both" if has_response else "neither"
            raise bad(f"row has {which} of 'response' and 'output'; give exactly one")
        if isinstance(row["response"] if has_response else None, dict):
            if not by_prompt:
                for task in tasks.values():
                    by_prompt.setdefault(_prompt_key(task.prompt), []).append(task.task_id)
            task_id, items = _nemo_gym_row(row, number, tasks, by_prompt, bad)
            rows.append(ResponseRow(line=number, task_id=task_id, items=items))
            continue
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            raise bad("missing task_id" if task_id is None else "task_id must be a string")
        if task_id not in tasks:
            raise bad(f"unknown task_id {task_id!r} (not in the tasks file)")
        if has_response:
            if not isinstance(row["response"], str):
                raise bad(
                    "'response' must be a string (the model's final text) "
                    "or a NeMo Gym Responses object"
                )
            items = assistant_items(row["response"], 0)
        else:
            items = _check_output(row["output"], bad)
        rows.append(ResponseRow(line=number, task_id=task_id, items=items))
    return rows


def score_responses(
    env: Environment, tasks: dict[str, Task], rows: Iterable[ResponseRow]
) -> list[dict]:
    """One score row per response row, in order (the task's prompt is prefixed to its items)."""
    scored = []
    for row in rows:
        task = tasks[row.task_id]
        try:
            score = env.verify(task, prompt_items(task.prompt) + row.items)
        except Exception as exc:
            raise VerifierCrash(
                f"the {env.name} verifier raised on response line {row.line} "
                f"(task {row.task_id!r}): {type(exc).__name__}: {_one_line(str(exc))}"
            ) from exc
        scored.append(
            {
                "task_id": row.task_id,
                "reward": score.reward,
                "reward_components": dict(score.components),
                "failure_kind": str(score.failure_kind) if score.failure_kind else None,
                "success": score.success,
            }
        )
    return scored


def write_jsonl_atomic(path: Path, rows: Iterable[dict]) -> None:
    """Write ``rows`` as JSONL to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600: others could not read the result
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def verify_files(
    env: Environment, tasks_path: Path, responses_path: Path, out_path: Path, fmt: str = "gymflow"
) -> list[dict]:
    """Load, validate and score everything, then write ``out_path``; returns the score rows."""
    tasks = load_tasks(env, tasks_path, fmt)
    rows = load_responses(responses_path, tasks)
    scored = score_responses(env, tasks, rows)
    write_jsonl_atomic(out_path, scored)
    return scored


def _check_output(output: object, bad: Callable[[str], VerifyInputError]) -> list[dict]:
    """The structure of an ``output`` list (not its content: bad arguments JSON is scored)."""
    if not isinstance(output, list):
        raise bad("'output' must be a list of Responses items")
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise bad(f"output[{i}] must be an object with a string 'type'")
        if item["type"] == "message" and not isinstance(item.get("role"), str):
            raise bad(f"output[{i}] is a message without a string 'role'")
        if item["type"] == "function_call":
            for key in ("name", "arguments"):
                if not isinstance(item.get(key), str):
                    raise bad(
                        f"output[{i}] is a function_call whose {key!r} is not a string"
                        + (" (arguments are a JSON-encoded string)" if key == "arguments" else "")
                    )
    return [dict(item) for item in output]


def _nemo_gym_row(
    row: dict,
    line: int,
    tasks: dict[str, Task],
    by_prompt: dict[str, list[str]],
    bad: Callable[[str], VerifyInputError],
) -> tuple[str, list[dict]]:
    """``(task_id, items)`` of a NeMo Gym rollout row; its task by id, else by its prompt."""
    from gymflow.nemo_gym import parse_rollout_row  # a function import: nemo_gym imports us

    try:
        rollout = parse_rollout_row(row, line)
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise bad(f"not a NeMo Gym rollout: {problem}") from None
    if rollout.task_id is not None:
        if rollout.task_id not in tasks:
            raise bad(f"unknown task_id {rollout.task_id!r} (not in the tasks file)")
        task = tasks[rollout.task_id]
        if rollout.prompt is not None and _prompt_key(rollout.prompt) != _prompt_key(task.prompt):
            raise bad(f"the rollout's input differs from the prompt of task {task.task_id!r}")
        return task.task_id, _check_output(rollout.items, bad)
    if rollout.prompt is None:
        raise bad("a NeMo Gym rollout without task_id needs responses_create_params.input")
    found = by_prompt.get(_prompt_key(rollout.prompt), [])
    if len(found) != 1:
        raise bad(
            "no task has this rollout's prompt (responses_create_params.input)"
            if not found
            else f"{len(found)} tasks have this rollout's prompt ({', '.join(found[:3])}); "
            "give task_id"
        )
    return found[0], _check_output(rollout.items, bad)


def _prompt_key(messages: list[dict]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in messages], ensure_ascii=False)


def _row_error(path: Path, line: int, problem: str) -> VerifyInputError:
    return VerifyInputError(path, line, problem, FailureKind.SCHEMA_VIOLATION)


def _validation_summary(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "row"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first['msg']}{more}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
