"""The WorkBench sandbox: immutable base tables shared by all sessions, and a per-session overlay.

WorkBench (and NeMo Gym's port of it) re-reads five CSV files into pandas for every session,
then copies the frames to compare outcomes; that is most of NeMo Gym's ~37 ms verify. Here the
base tables are loaded once per process into read-only rows (``MappingProxyType`` inside
tuples), and a :class:`Sandbox` holds only what its session changed:

* ``edits[table][id]`` — the new row of a seeded record, or ``None`` once it was deleted (a
  deleted seeded record never comes back; a later record that reuses its id is a new record,
  as NeMo Gym's ``stable_ids`` rule has it);
* ``created[table][id]`` — records created in this session, in creation order;
* ``plots`` — the analytics plots created (WorkBench's analytics state is its list of plots).

Seeding a session is building an empty overlay (microseconds); reads merge base and overlay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

DATA_DIR = Path(__file__).with_name("data")
SANDBOX_FILE = DATA_DIR / "workbench_sandbox.json"

ID_COLUMNS = {
    "emails": "email_id",
    "calendar_events": "event_id",
    "project_tasks": "task_id",
    "customer_relationship_manager_data": "customer_id",
}
"""The tables tools change, with their id column (analytics visits are read-only)."""


@dataclass(frozen=True)
class Table:
    """One base table: read-only rows in file order, indexed by id."""

    name: str
    key: str
    columns: tuple[str, ...]
    rows: tuple[Mapping[str, str], ...]
    by_id: Mapping[str, Mapping[str, str]]
    ids_desc: tuple[str, ...]
    """Ids in descending string order: the next id is max(live ids) + 1, as in WorkBench."""


@dataclass(frozen=True)
class Base:
    tables: Mapping[str, Table]
    visits: tuple[Mapping[str, str], ...]
    directory: tuple[str, ...]
    tool_schemas: tuple[dict, ...]
    """NeMo Gym's 27 Responses-style tool schemas, kept to check ours against."""


@cache
def base() -> Base:
    """The base tables, read once per process."""
    raw = json.loads(SANDBOX_FILE.read_text(encoding="utf-8"))
    tables = {}
    for name, key in ID_COLUMNS.items():
        rows = tuple(MappingProxyType(dict(r)) for r in raw["tables"][name])
        by_id = {r[key]: r for r in rows}
        if len(by_id) != len(rows):
            raise ValueError(f"{SANDBOX_FILE}: duplicate ids in {name}")
        tables[name] = Table(
            name=name,
            key=key,
            columns=tuple(rows[0]),
            rows=rows,
            by_id=MappingProxyType(by_id),
            ids_desc=tuple(sorted(by_id, reverse=True)),
        )
    return Base(
        tables=MappingProxyType(tables),
        visits=tuple(MappingProxyType(dict(r)) for r in raw["tables"]["analytics_data"]),
        directory=tuple(raw["company_directory"]),
        tool_schemas=tuple(raw["tool_schemas"]),
    )


class Sandbox:
    """One session's view of the sandbox: the shared base plus this session's changes."""

    __slots__ = ("base", "created", "edits", "plots")

    def __init__(self, base_data: Base | None = None) -> None:
        self.base = base_data or base()
        self.edits: dict[str, dict[str, dict | None]] = {}
        self.created: dict[str, dict[str, dict]] = {}
        self.plots: list[str] = []

    def get(self, table: str, record_id: str) -> Mapping[str, str] | None:
        """The live record ``record_id`` of ``table``, or ``None``."""
        created = self.created.get(table)
        if created and record_id in created:
            return created[record_id]
        edits = self.edits.get(table)
        if edits and record_id in edits:
            return edits[record_id]
        return self.base.tables[table].by_id.get(record_id)

    def rows(self, table: str) -> Iterator[Mapping[str, str]]:
        """Live records in WorkBench's order: seeded ones in file order, then created ones."""
        edits = self.edits.get(table)
        if not edits:
            yield from self.base.tables[table].rows
        else:
            key = self.base.tables[table].key
            for row in self.base.tables[table].rows:
                if row[key] not in edits:
                    yield row
                elif (edited := edits[row[key]]) is not None:
                    yield edited
        yield from self.created.get(table, {}).values()

    def insert(self, table: str, row: dict[str, str], pad: bool = True) -> str:
        """Add a record with the next id (zero-padded to 8 digits unless ``pad`` is False)."""
        t = self.base.tables[table]
        edits = self.edits.get(table, {})
        top = next((i for i in t.ids_desc if edits.get(i, t.by_id[i]) is not None), "")
        created = self.created.setdefault(table, {})
        if created:
            top = max(top, max(created))
        new_id = str(int(top) + 1) if top else "1"
        if pad:
            new_id = new_id.zfill(8)
        created[new_id] = {t.key: new_id, **row}
        return new_id

    def update(self, table: str, record_id: str, field: str, value: str) -> None:
        created = self.created.get(table)
        if created and record_id in created:
            created[record_id] = {**created[record_id], field: value}
            return
        row = self.get(table, record_id)
        if row is None:
            raise LookupError(f"no record {record_id} in {table}")
        self.edits.setdefault(table, {})[record_id] = {**row, field: value}

    def delete(self, table: str, record_id: str) -> None:
        created = self.created.get(table)
        if created and record_id in created:
            del created[record_id]
            return
        if self.get(table, record_id) is None:
            raise LookupError(f"no record {record_id} in {table}")
        self.edits.setdefault(table, {})[record_id] = None
