"""The 690 real WorkBench tasks, and the two external task formats ``gymflow verify`` reads.

A task's prompt is NeMo Gym's system message (the date, the working hours) and the WorkBench
query; its ground truth is ``{"calls": [{"name", "arguments"}]}``, the gold state-changing
calls with NeMo Gym's tool names (``email_delete_email`` for WorkBench's
``email.delete_email``). Real tasks keep WorkBench's id as ``task_id`` and are split by
content hash (:func:`gymflow.core.task_record.split_of`), so the same task always lands in the
same split whichever way it was loaded.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from gymflow.core.task_record import Task, content_hash, split_of
from gymflow.data.nemo_gym import nemo_prompt
from gymflow.environments.workplace.outcome import SPECS

ENV_NAME = "workplace"
TASKS_FILE = Path(__file__).with_name("data") / "workbench_tasks.jsonl"
SYSTEM_PROMPT = (
    "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00. Remember the "
    "current date and time when answering queries. Meetings must not start before 9am or end "
    "after 6pm."
)
"""NeMo Gym's workplace_assistant system message, word for word."""
HELDOUT_FRAC, VAL_FRAC = 0.1, 0.05
"""The lifecycle's default split shares (``LifecycleConfig``)."""


def prompt_for(query: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}]


def truth_from_workbench(row: dict) -> dict:
    """Ground truth from a WorkBench row's ``answer_calls`` (dotted names → underscores)."""
    calls = row["answer_calls"]
    if not isinstance(calls, list):
        raise TypeError("answer_calls must be a list")
    return {
        "calls": [
            {"name": c["name"].replace(".", "_"), "arguments": dict(c["arguments"])} for c in calls
        ]
    }


def import_workbench(
    row: dict,
    tools: list[dict] | None = None,
    heldout_frac: float = HELDOUT_FRAC,
    val_frac: float = VAL_FRAC,
) -> Task:
    """A WorkBench task row (``workbench_tasks.jsonl`` as it is) → Task, keeping its id."""
    query = row["query"]
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be non-empty text")
    prompt, truth = prompt_for(query), truth_from_workbench(row)
    digest = content_hash(prompt, truth)
    return Task(
        task_id=str(row["id"]),
        env=ENV_NAME,
        split=split_of(digest, heldout_frac, val_frac),
        prompt=prompt,
        tools=tools if tools is not None else _tool_schemas(),
        ground_truth=truth,
        generator="workbench",
        seed=0,
        content_hash=digest,
    )


def import_nemo_gym(row: dict) -> Task:
    """A NeMo Gym ``workplace_assistant`` task row → Task (its ``id``, its prompt and tools).

    NeMo Gym's ``ground_truth`` is a list of ``{"name", "arguments": JSON string}``. Imported
    rows are for evaluating or checking a verifier, so they are all held out.
    """
    messages, tools = nemo_prompt(row)
    known = {t["function"]["name"] for t in _tool_schemas()}
    unknown = sorted({t["function"]["name"] for t in tools} - known)
    if unknown:
        raise ValueError(f"the row offers tools the workplace has not: {', '.join(unknown)}")
    calls = []
    for call in row["ground_truth"]:
        arguments = call["arguments"]
        arguments = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if not isinstance(arguments, dict):
            raise TypeError("ground_truth arguments must be a JSON object")
        calls.append({"name": call["name"], "arguments": arguments})
    truth = {"calls": calls}
    digest = content_hash(messages, truth)
    return Task(
        task_id=str(row["id"]) if row.get("id") is not None else f"{ENV_NAME}-{digest[:12]}",
        env=ENV_NAME,
        split="heldout",
        prompt=messages,
        tools=tools or _tool_schemas(),
        ground_truth=truth,
        generator="nemo_gym",
        seed=0,
        content_hash=digest,
    )


@cache
def workbench_rows() -> tuple[dict, ...]:
    """The 690 WorkBench rows as stored in ``data/workbench_tasks.jsonl``."""
    with TASKS_FILE.open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def workbench_tasks(heldout_frac: float = HELDOUT_FRAC, val_frac: float = VAL_FRAC) -> list[Task]:
    """All 690 real tasks, ids kept, split by content hash."""
    tools = _tool_schemas()
    return [import_workbench(row, tools, heldout_frac, val_frac) for row in workbench_rows()]


def _tool_schemas() -> list[dict]:
    """The schemas ``GET /tools`` serves (derived from the tools' signatures)."""
    return [spec.schema for spec in SPECS.values()]
