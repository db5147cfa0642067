"""PLACEHOLDER"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from gymflow.core.jsonl import InputFileError, one_line, read_jsonl, row_error, write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import load_tasks
from gymflow.env.environment import Environment


class VerifierCrash(RuntimeError):
    """The environment's verifier raised on a well-formed row (a verifier bug, not bad input)."""


@dataclass(frozen=True)
class ResponseRow:
    """One row of the responses file: its line number, task and assistant items (no prompt)."""

    line: int
    task_id: str
    items: list[dict]


def load_responses(path: Path, tasks: dict[str, Task]) -> list[ResponseRow]:
    """Response rows in file order; each names a known task and has ``response`` xor ``output``.

    A NeMo Gym rollout row (``response`` is an object) may name its task by its prompt instead.
    """
    rows: list[ResponseRow] = []
    by_prompt: dict[str, list[str]] = {}
    for number, row in read_jsonl(path):
        bad = partial(row_error, path, number)
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
                f"(task {row.task_id!r}): {type(exc).__name__}: {one_line(str(exc))}"
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


def verify_files(
    env: Environment, tasks_path: Path, responses_path: Path, out_path: Path, fmt: str = "gymflow"
) -> list[dict]:
    """Load, validate and score everything, then write ``out_path``; returns the score rows."""
    tasks = load_tasks(env, tasks_path, fmt)
    rows = load_responses(responses_path, tasks)
    scored = score_responses(env, tasks, rows)
    write_jsonl_atomic(out_path, scored)
    return scored


def _check_output(output: object, bad: Callable[[str], InputFileError]) -> list[dict]:
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
    bad: Callable[[str], InputFileError],
) -> tuple[str, list[dict]]:
    """``(task_id, items)`` of a NeMo Gym rollout row; its task by id, else by its prompt."""
    from gymflow.data.nemo_gym import parse_rollout_row  # a function import: nemo_gym imports us

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
