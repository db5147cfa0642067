"""Verifier profiling: score gold answers, adversarial probes and policy samples twice each.

Before any training the verifier must be deterministic (same trajectory, same score) and must
not reward a probe above the ceiling that probe declares. The report holds the reward
distribution, every probe result and a per-sample table for a person to inspect.
"""

from __future__ import annotations

import random
from collections import Counter

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.env.environment import Environment


def profile_verifier(
    env: Environment, tasks: list[Task], policy_texts: dict[str, str], n: int, seed: int
) -> dict:
    """Score ``n`` samples (gold, probes, policy outputs) twice; raise on any red flag.

    ``policy_texts`` maps task ids to what the current policy wrote for them.
    """
    rng = random.Random(seed)
    samples: list[tuple[str, Task, str, float | None]] = []
    picked = rng.sample(tasks, min(len(tasks), max(1, n // 4)))
    for task in picked:
        samples.append(("gold", task, env.gold_text(task), None))
        if task.task_id in policy_texts:
            samples.append(("policy", task, policy_texts[task.task_id], None))
        for probe in env.probes(task):
            samples.append((f"probe:{probe.name}", task, probe.text, probe.max_reward))
    rng.shuffle(samples)
    gold_first = [s for s in samples if s[0] == "gold"] + [s for s in samples if s[0] != "gold"]
    samples = gold_first[: max(n, len([s for s in samples if s[0] == "gold"]))]
    rows, problems = [], []
    for source, task, text, ceiling in samples:
        items = prompt_items(task.prompt) + assistant_items(text, 0)
        first, second = env.verify(task, items), env.verify(task, items)
        deterministic = first == second
        row = {
            "source": source,
            "task_id": task.task_id,
            "text": text[:200],
            "reward": first.reward,
            "failure_kind": str(first.failure_kind) if first.failure_kind else None,
            "deterministic": deterministic,
            "ceiling": ceiling,
        }
        rows.append(row)
        if not deterministic:
            problems.append(
                (
                    FailureKind.VERIFIER_NONDETERMINISTIC,
                    f"{task.task_id} {source}: {first} vs {second}",
                )
            )
        if source == "gold" and not first.success:
            problems.append(
                (FailureKind.PROBE_REWARDED, f"gold answer of {task.task_id} fails: {first.detail}")
            )
        if ceiling is not None and (first.reward > ceiling or first.success):
            problems.append(
                (
                    FailureKind.PROBE_REWARDED,
                    f"{source} on {task.task_id} got {first.reward} > {ceiling}",
                )
            )
    report = {
        "n": len(rows),
        "by_source": _by_source(rows),
        "reward_histogram": _histogram([r["reward"] for r in rows]),
        "deterministic": all(r["deterministic"] for r in rows),
        "problems": [f"[{k}] {m}" for k, m in problems],
        "rows": rows,
    }
    if problems:
        kind, message = problems[0]
        raise GymflowError(
            kind, f"verifier profiling failed ({len(problems)} problems); first: {message}"
        )
    return report


def _by_source(rows: list[dict]) -> dict:
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(r["source"].split(":")[0], []).append(r["reward"])
    return {
        k: {"n": len(v), "mean_reward": sum(v) / len(v), "max_reward": max(v)}
        for k, v in groups.items()
    }


def _histogram(values: list[float], bins: int = 8) -> dict[str, int]:
    edges = [-1.0 + 2.0 * i / bins for i in range(bins + 1)]
    counts: Counter[str] = Counter()
    for v in values:
        i = min(bins - 1, int((v + 1.0) / 2.0 * bins))
        counts[f"[{edges[i]:.2f},{edges[i + 1]:.2f})"] += 1
    return dict(sorted(counts.items()))
