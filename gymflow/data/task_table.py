"""Tasks ⇄ Parquet (validated with the ``TASKS`` schema) and the dataset hash used in lineage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from gymflow.core.task_record import Task
from gymflow.data.schemas import TASKS, read_table, write_table

_JSON_COLUMNS = ("prompt", "tools", "ground_truth")


def tasks_frame(tasks: list[Task]) -> pl.DataFrame:
    rows = []
    for t in tasks:
        row = t.model_dump()
        for col in _JSON_COLUMNS:
            row[col] = json.dumps(row[col], ensure_ascii=False)
        rows.append(row)
    return pl.DataFrame(
        rows, schema={c: (pl.Int64 if c == "seed" else pl.String) for c in TASKS.columns}
    )


def write_tasks(tasks: list[Task], path: Path) -> Path:
    return write_table(tasks_frame(tasks), TASKS, path)


def read_tasks(path: Path) -> list[Task]:
    df = read_table(path, TASKS)
    out = []
    for row in df.iter_rows(named=True):
        for col in _JSON_COLUMNS:
            row[col] = json.loads(row[col])
        out.append(Task(**row))
    return out


def dataset_hash(tasks: list[Task]) -> str:
    """Order-independent hash of a task set's contents."""
    digest = hashlib.sha256()
    for h in sorted(t.content_hash for t in tasks):
        digest.update(h.encode())
    return digest.hexdigest()[:16]
