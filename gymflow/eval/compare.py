"""Paired comparison of two policies evaluated on the same tasks with the same seeds.

For each measure, a task's value is its mean over its samples (success, reward over scored
samples, valid format, unsafe), and the difference ``A - B`` is averaged over the tasks both
policies have a value for, with the paired 95 % interval the held-out gate uses
(:func:`gymflow.eval.stats.paired_delta`). "Overall" pools the tasks of every environment, one
weight per task. ``significant`` says the interval excludes 0.
"""

from __future__ import annotations

from gymflow.eval.evaluation import per_task_mean
from gymflow.eval.stats import paired_delta

MEASURES = {
    "success": "success",
    "reward": "reward",
    "well_formed": "well_formed",
    "unsafe": "unsafe",
}
"""Reported name -> row key."""


def paired_differences(rows_a: list[dict], rows_b: list[dict]) -> dict:
    """``{measure: {delta, ci95, n_tasks, significant}}`` for ``A - B`` on shared tasks."""
    out = {}
    for name, key in MEASURES.items():
        a, b = _by_task(rows_a, key), _by_task(rows_b, key)
        shared = sorted(a.keys() & b.keys())
        if not shared:
            out[name] = None
            continue
        d = paired_delta([a[t] for t in shared], [b[t] for t in shared])
        lo, hi = d["ci95"]
        out[name] = {**d, "n_tasks": len(shared), "significant": lo > 0 or hi < 0}
    return out


def _by_task(rows: list[dict], key: str) -> dict[tuple[str, str], float]:
    """Per-(env, task) means: task ids are unique within an environment only."""
    out = {}
    for env in {r["env"] for r in rows}:
        mine = [r for r in rows if r["env"] == env]
        out |= {(env, task): v for task, v in per_task_mean(mine, key).items()}
    return out
