"""Coverage of a task set: how many tasks of each split per tool, template, difficulty, source.

Each task gets four facets, read the same way for every environment:

* ``tool`` — the tools its gold episode calls (``+``-joined, sorted), ``none`` if it calls none;
* ``template`` — the ground truth's ``family`` / ``game`` / ``template`` field when it has one,
  else the first words of the normalized prompt with numbers as ``#``;
* ``difficulty`` — the ground truth's ``level`` / ``difficulty`` / ``size`` field, else the
  number of tool calls of the gold episode (``calls=N``);
* ``source`` — the ground truth's ``source`` field, else the task's ``generator``.

:func:`coverage_rows` counts them per split; :func:`coverage_gaps` names the values the held-out
split has that training never sees (and the reverse), which a person should look at.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from gymflow.core.task_record import Task
from gymflow.core.tool_calls import parse_assistant_text
from gymflow.data.dedup import normalized_prompt
from gymflow.env.environment import Environment

FACETS = ("tool", "template", "difficulty", "source")
SPLITS = ("train", "val", "heldout")
TEMPLATE_WORDS = 4
_NUMBER = re.compile(r"\d+")


def task_facets(env: Environment, task: Task) -> dict[str, str]:
    """The four facets of one task (see the module docstring)."""
    truth = task.ground_truth
    tools: set[str] = set()
    calls = 0
    for turn in env.gold_turns(task):
        parsed = parse_assistant_text(turn).calls
        tools |= {name for name, _ in parsed}
        calls += len(parsed)
    template = _field(truth, "family", "game", "template")
    if template is None:
        words = normalized_prompt(task.prompt).split(" ")[:TEMPLATE_WORDS]
        template = _NUMBER.sub("#", " ".join(words))
    difficulty = _field(truth, "level", "difficulty", "size")
    return {
        "tool": "+".join(sorted(tools)) or "none",
        "template": template,
        "difficulty": difficulty if difficulty is not None else f"calls={calls}",
        "source": _field(truth, "source") or task.generator,
    }


def _field(truth: dict, *names: str) -> str | None:
    for name in names:
        value = truth.get(name)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
    return None


def coverage_rows(env: Environment, tasks: Sequence[Task]) -> list[dict]:
    """One row per (facet, value): tasks in each split and in all, most frequent first."""
    counts: dict[tuple[str, str], Counter] = {}
    for task in tasks:
        for facet, value in task_facets(env, task).items():
            counts.setdefault((facet, value), Counter())[task.split] += 1
    rows = [
        {"facet": facet, "value": value, **{s: c[s] for s in SPLITS}, "total": sum(c.values())}
        for (facet, value), c in counts.items()
    ]
    order = {facet: i for i, facet in enumerate(FACETS)}
    return sorted(rows, key=lambda r: (order[r["facet"]], -r["total"], r["value"]))


def coverage_gaps(rows: Sequence[dict]) -> list[str]:
    """Facet values held out but never trained on, or trained on but never held out."""
    gaps = []
    for row in rows:
        where = f"{row['facet']}={row['value']}"
        if row["heldout"] and not row["train"]:
            gaps.append(f"{where}: {row['heldout']} held-out tasks, none in train")
        elif row["train"] and not row["heldout"]:
            gaps.append(f"{where}: {row['train']} train tasks, none held out")
    return gaps


def plot_coverage(rows: Sequence[dict], path: Path, top: int = 12) -> Path:
    """One horizontal bar chart per facet (its ``top`` values), bars split by split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(FACETS), 1, figsize=(8, 2.2 * len(FACETS) + 1))
    for ax, facet in zip(axes, FACETS, strict=True):
        shown = [r for r in rows if r["facet"] == facet][:top][::-1]
        labels = [r["value"][:40] for r in shown]
        left = [0] * len(shown)
        for split in SPLITS:
            values = [r[split] for r in shown]
            ax.barh(labels, values, left=left, label=split)
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.set_title(f"{facet} (top {len(shown)})", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("tasks")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
