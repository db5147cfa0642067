"""``gymflow verify``: score given responses with an environment's verifier, no model.

For checking a verifier against an external oracle (the task files and their formats are read
by :mod:`gymflow.data.task_files`). **Every line of the responses file gets a score row**, in
order, so one bad line never costs the others their scores:

* a line whose ``task_id`` the tasks file does not hold is ``unknown_task`` with no reward
  (``null``): it is counted apart and never in the mean (the command exits 2 naming it);
* a line that is not a usable response — not JSON, no ``task_id``, neither or both of
  ``response`` and ``output``, items not of the Responses shape (a list as ``call_id``; read by
  :func:`gymflow.env.items.normalize_items`, as the resources server's ``/verify`` reads them)
  — is the model's (or its harness's) failure: scored ``invalid_trajectory`` at the
  environment's floor, with a ``detail`` naming the line and the problem;
* a verifier that raises on a well-formed line is a bug in the environment: that line is
  ``verifier_error`` with no reward (``null``) and the exception in ``detail``; the others are
  scored as usual (a verifier that reports its own kind, e.g. a judge that is down, gives that
  kind the same way).

:func:`summary` counts rows by failure kind. Only a file that cannot be read at all (or a bad
tasks file) raises :class:`~gymflow.core.jsonl.InputFileError`, and then nothing is written;
the scores file is written to a temporary file and renamed, so it is complete or absent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.jsonl import one_line, read_jsonl, write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import load_tasks
from gymflow.env.environment import Environment
from gymflow.env.items import ItemError, normalize_items


class VerifierCrash(RuntimeError):
    """Kept for callers that catch it: scoring no longer raises it (a verifier that raises is
    ``verifier_error`` for its line only)."""


class _Malformed(ValueError):
    """A line that cannot be scored as a response (the reason is its message)."""


class _UnknownTask(_Malformed):
    """A line whose task the tasks file does not hold: not the model's failure, unscored."""


@dataclass(frozen=True)
class ResponseRow:
    """One line of the responses file: its number, task and assistant items (no prompt), or
    why it is malformed (then ``items`` is empty)."""

    line: int
    task_id: str | None
    items: list[dict]
    problem: str | None = None
    unknown_task: bool = False


def load_responses(path: Path, tasks: dict[str, Task]) -> list[ResponseRow]:
    """One row per non-blank line, in file order; a malformed line carries its ``problem``.

    A NeMo Gym rollout row (``response`` is an object) may name its task by its prompt instead.
    """
    rows: list[ResponseRow] = []
    by_prompt: dict[str, list[str]] = {}
    for number, row in _lines(path):
        task_id = row.get("task_id") if isinstance(row, dict) else None
        task_id = task_id if isinstance(task_id, str) else None
        try:
            if not isinstance(row, dict):
                raise _Malformed(row)
            if isinstance(row.get("response"), dict) and not by_prompt:
                for task in tasks.values():
                    by_prompt.setdefault(_prompt_key(task.prompt), []).append(task.task_id)
            task_id, items = _response(row, tasks, by_prompt)
        except _Malformed as exc:
            unknown = isinstance(exc, _UnknownTask)
            rows.append(ResponseRow(number, task_id, [], str(exc), unknown))
            continue
        rows.append(ResponseRow(number, task_id, items))
    return rows


def _lines(path: Path) -> Iterator[tuple[int, dict | str]]:
    """``(line number, object)``, or ``(line number, what is wrong)`` for a line that is not a
    JSON object; a file that cannot be read at all raises (``read_jsonl``'s checks)."""
    raw = Path(path).read_bytes() if Path(path).is_file() else None
    if raw is None or raw[:2] == b"\x1f\x8b":  # missing or gzip: read_jsonl says what is wrong
        yield from read_jsonl(path)
        return
    for number, data in enumerate(raw.split(b"\n"), start=1):
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, f"not UTF-8 (byte 0x{data[exc.start : exc.start + 1].hex()})"
            continue
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            yield number, f"not valid JSON ({one_line(str(exc))[:200]})"
            continue
        yield number, obj if isinstance(obj, dict) else f"not a JSON object ({type(obj).__name__})"


def _response(
    row: dict, tasks: dict[str, Task], by_prompt: dict[str, list[str]]
) -> tuple[str, list[dict]]:
    """``(task_id, items)`` of a well-formed line; raises :class:`_Malformed`."""
    has_response, has_output = "response" in row, "output" in row
    if has_response == has_output:
        which = "both" if has_response else "neither"
        raise _Malformed(f"row has {which} of 'response' and 'output'; give exactly one")
    if has_response and isinstance(row["response"], dict):
        task_id, items = _nemo_gym_row(row, tasks, by_prompt)
    else:
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            raise _Malformed("missing task_id" if task_id is None else "task_id must be a string")
        if task_id not in tasks:
            raise _UnknownTask(f"unknown task_id {task_id!r} (not in the tasks file)")
        if has_response and not isinstance(row["response"], str):
            raise _Malformed(
                "'response' must be a string (the model's final text) "
                "or a NeMo Gym Responses object"
            )
        if has_response:
            return task_id, assistant_items(row["response"], 0)
        try:
            items = normalize_items(row["output"], "output")
        except ItemError as exc:
            raise _Malformed(str(exc)) from None
    return task_id, items


def score_responses(
    env: Environment, tasks: dict[str, Task], rows: Iterable[ResponseRow]
) -> list[dict]:
    """One score row per response row, in order (the task's prompt is prefixed to its items)."""
    return [_score(env, tasks, row) for row in rows]


def _score(env: Environment, tasks: dict[str, Task], row: ResponseRow) -> dict:
    if row.unknown_task:
        return _unscored(row, FailureKind.UNKNOWN_TASK, row.problem)
    if row.problem is not None:
        score = env.invalid_trajectory_score(f"line {row.line}: {row.problem}")
        return {**_row(row.task_id, score), "detail": score.detail}
    task = tasks[row.task_id]
    try:
        score = env.verify(task, prompt_items(task.prompt) + row.items)
    except GymflowError as exc:  # a verifier that reports its own kind (a judge down)
        return _unscored(row, exc.kind, exc.detail)
    except Exception as exc:
        detail = f"the {env.name} verifier raised {type(exc).__name__}: {one_line(str(exc))}"
        return _unscored(row, FailureKind.VERIFIER_ERROR, detail)
    return _row(row.task_id, score)


def _row(task_id: str | None, score) -> dict:
    return {
        "task_id": task_id,
        "reward": score.reward,
        "reward_components": dict(score.components),
        "failure_kind": str(score.failure_kind) if score.failure_kind else None,
        "success": score.success,
    }


def _unscored(row: ResponseRow, kind: FailureKind, detail: str) -> dict:
    return {
        "task_id": row.task_id,
        "reward": None,
        "reward_components": {},
        "failure_kind": str(kind),
        "success": False,
        "detail": f"line {row.line}: {detail}"[:1000],
    }


def summary(scored: list[dict]) -> str:
    """``N responses scored: mean reward …, K successes; <kind> <count>, …`` (the mean over the
    rows that have a reward; every failure kind counted)."""
    rewards = [row["reward"] for row in scored if row["reward"] is not None]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    wins = sum(bool(row["success"]) for row in scored)
    kinds = Counter(row["failure_kind"] for row in scored if row["failure_kind"])
    text = f"{len(scored)} responses scored: mean reward {mean:.3f}, {wins} successes"
    if len(rewards) < len(scored):
        text += f" ({len(scored) - len(rewards)} without a reward)"
    if kinds:
        text += "; " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    return text


def unscored(scored: list[dict]) -> int:
    """Rows the verifier could not score (``verifier_error`` and other kinds without reward),
    rows of unknown tasks left out."""
    return sum(row["reward"] is None for row in scored) - len(unknown_tasks(scored))


def unknown_tasks(scored: list[dict]) -> list[str]:
    """The ``line N`` of each row whose task the tasks file does not hold."""
    return [
        row["detail"].split(":", 1)[0]
        for row in scored
        if row["failure_kind"] == FailureKind.UNKNOWN_TASK
    ]


def verify_files(
    env: Environment, tasks_path: Path, responses_path: Path, out_path: Path, fmt: str = "gymflow"
) -> list[dict]:
    """Load, validate and score everything, then write ``out_path``; returns the score rows."""
    tasks = load_tasks(env, tasks_path, fmt)
    rows = load_responses(responses_path, tasks)
    scored = score_responses(env, tasks, rows)
    write_jsonl_atomic(out_path, scored)
    return scored


def _nemo_gym_row(
    row: dict, tasks: dict[str, Task], by_prompt: dict[str, list[str]]
) -> tuple[str, list]:
    """``(task_id, items)`` of a NeMo Gym rollout row; its task by id, else by its prompt."""
    from gymflow.data.nemo_gym import parse_rollout_row  # a function import: nemo_gym imports us

    try:
        rollout = parse_rollout_row(row)
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise _Malformed(f"not a NeMo Gym rollout: {problem}") from None
    if rollout.task_id is not None:
        if rollout.task_id not in tasks:
            raise _UnknownTask(f"unknown task_id {rollout.task_id!r} (not in the tasks file)")
        task = tasks[rollout.task_id]
        if rollout.prompt is not None and _prompt_key(rollout.prompt) != _prompt_key(task.prompt):
            raise _Malformed(
                f"the rollout's input differs from the prompt of task {task.task_id!r}"
            )
        return task.task_id, rollout.items
    if rollout.prompt is None:
        raise _Malformed("a NeMo Gym rollout without task_id needs responses_create_params.input")
    found = by_prompt.get(_prompt_key(rollout.prompt), [])
    if len(found) != 1:
        raise _Malformed(
            "no task has this rollout's prompt (responses_create_params.input)"
            if not found
            else f"{len(found)} tasks have this rollout's prompt ({', '.join(found[:3])}); "
            "give task_id"
        )
    return found[0], rollout.items


def _prompt_key(messages: list[dict]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in messages], ensure_ascii=False)
