"""Outcomes: replay calls on a fresh sandbox and compare what two replays changed.

This is WorkBench's scoring rule (and NeMo Gym's ``is_correct``) computed on overlays instead
of whole tables. Both replays start from the same base, so two final states are equal exactly
when, for every record either replay touched, the final records agree — after the same
normalisation NeMo Gym applies:

* text is compared lower-cased, except ``status``, ``list_name`` and ``board``; an empty value
  and a missing one are the same (the base tables hold ``""`` where pandas held NaN);
* seeded records are matched by id; a seeded record deleted at any point is gone, and records
  created in the episode (whatever id they got) are matched by content, as a multiset;
* analytics plots are a multiset of file names.

Read-only tools are not replayed: they cannot change the outcome.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gymflow.env.tool_schema import tool_spec
from gymflow.environments.workplace.sandbox import Base, Sandbox
from gymflow.environments.workplace.tools import ACTIONS, TOOLS
from gymflow.environments.workplace.tools.common import KEEP_CASE

SPECS = {fn.__name__: tool_spec(fn) for fn in TOOLS}


@dataclass
class Replay:
    """The sandbox after a replay, and how the replayed calls fared."""

    sandbox: Sandbox
    unknown_tools: int = 0
    invalid_calls: int = 0
    """Calls whose arguments the schema refused, and actions the tool refused."""
    actions_done: Counter[str] = field(default_factory=Counter)
    actions_tried: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Diff:
    """Where an episode's outcome differs from the gold outcome (empty = the same outcome)."""

    missing: tuple[str, ...]
    """Gold changes the episode did not make (or made differently)."""
    unwanted: tuple[str, ...]
    """Changes the episode made that the gold leaves out: other records, extra records."""
    gold_changes: int

    @property
    def same(self) -> bool:
        return not self.missing and not self.unwanted


def replay(calls: Iterable[tuple[str, object]], base: Base | None = None) -> Replay:
    """Run ``(name, arguments)`` calls on a fresh sandbox, as the resources server would.

    Each call is validated like ``POST /tools/{name}`` does (strict types, no unknown
    arguments); a refused call changes nothing, which is also what it did in the episode.
    """
    result = Replay(Sandbox(base))
    for name, arguments in calls:
        spec = SPECS.get(name)
        if spec is None:
            result.unknown_tools += 1
            continue
        if name in ACTIONS:
            result.actions_tried.add(name)
        try:
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be a JSON object")
            args = spec.validate(arguments)
        except ValueError:
            result.invalid_calls += 1
            continue
        if name not in ACTIONS:
            continue
        try:
            spec.fn(result.sandbox, **args)
        except Exception:  # the server turns any tool exception into an observation; so do we
            result.invalid_calls += 1
            continue
        result.actions_done[name] += 1
    return result


def compare(episode: Sandbox, gold: Sandbox) -> Diff:
    """How ``episode``'s changes differ from ``gold``'s (both replayed from the same base)."""
    missing: list[str] = []
    unwanted: list[str] = []
    gold_changes = 0
    for name, table in episode.base.tables.items():
        ep_edits, gold_edits = episode.edits.get(name, {}), gold.edits.get(name, {})
        for record_id in ep_edits.keys() | gold_edits.keys():
            seeded = _canon(table.by_id[record_id], table.key)
            ep = _canon(ep_edits[record_id], table.key) if record_id in ep_edits else seeded
            want = _canon(gold_edits[record_id], table.key) if record_id in gold_edits else seeded
            gold_changes += want != seeded
            if ep == want:
                continue
            what = f"{name} {record_id}: {_state(ep, seeded)}, expected {_state(want, seeded)}"
            (missing if want != seeded else unwanted).append(what)
        ep_new = Counter(_canon(r, table.key) for r in episode.created.get(name, {}).values())
        gold_new = Counter(_canon(r, table.key) for r in gold.created.get(name, {}).values())
        gold_changes += sum(gold_new.values())
        _unmatched(name, "record", gold_new - ep_new, ep_new - gold_new, missing, unwanted)
    ep_plots = Counter(p.lower() for p in episode.plots)
    gold_plots = Counter(p.lower() for p in gold.plots)
    gold_changes += len(gold.plots)
    _unmatched("analytics", "plot", gold_plots - ep_plots, ep_plots - gold_plots, missing, unwanted)
    return Diff(tuple(missing), tuple(unwanted), gold_changes)


def changes(sandbox: Sandbox) -> int:
    """How many records and plots ``sandbox`` changed relative to its base."""
    return len(compare(sandbox, Sandbox(sandbox.base)).unwanted)


def _unmatched(
    where: str, noun: str, lacking: Counter, extra: Counter, missing: list, unwanted: list
) -> None:
    """New records are matched by content: a wrong one made in place of a gold one is a
    missing change (wrong values); only those beyond the gold's count are unwanted."""
    wrong = min(lacking.total(), extra.total())
    missing += [f"{where}: a new {noun} differs from the expected one"] * wrong
    missing += [f"{where}: a new {noun} was not created"] * (lacking.total() - wrong)
    unwanted += [f"{where}: an extra {noun} was created"] * (extra.total() - wrong)


def _canon(row: Mapping[str, str] | None, key: str) -> tuple | None:
    """A record as compared: lower-cased text (but for KEEP_CASE fields), no id, "" = None."""
    if row is None:
        return None
    return tuple(
        (column, (value if column in KEEP_CASE else value.lower()) if value else None)
        for column, value in sorted(row.items())
        if column != key
    )


def _state(row: tuple | None, seeded: tuple | None) -> str:
    if row is None:
        return "deleted"
    return "unchanged" if row == seeded else "changed"
