"""The gate's general-capability check: policies on held-out sets of environments the run does
not train on (``GateSettings.general_envs``), so a tool_call run is also checked on math and
games.

Each environment's tasks are its held-out split as :func:`gymflow.eval.splits.eval_tasks`
finds it (the run's own rows of that environment if it has any, else the split regenerated
with the run's task settings), the first ``limit`` of them. Every policy runs greedy on the
same tasks with the same seeds, so the gate's comparison with the start is paired.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.data.task_table import dataset_hash
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.splits import GeneratedSplit, eval_tasks
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import Lineage


def general_envs(wanted: list[str], trained: set[str]) -> list[str]:
    """``wanted`` without the environments the run trains on, in order, once each.

    >>> general_envs(["math", "tool_call", "games", "math"], {"tool_call"})
    ['math', 'games']
    """
    return [e for i, e in enumerate(wanted) if e not in trained and e not in wanted[:i]]


def evaluate_general(
    envs: list[str],
    policies: dict[str, str],
    generated: GeneratedSplit,
    limit: int,
    seed: int,
    max_new_tokens: int,
    run_dir: Path,
    cache_dir: Path | None = None,
) -> dict[str, dict[str, list[dict]]]:
    """``{env: {label: rows}}`` for every policy (``{label: checkpoint folder}``) on every
    environment's held-out tasks; episodes are stored under ``run_dir/eval/heldout-<env>-<label>/``
    (the rollout layout), and an episode that could not finish fails the check."""
    if not envs:
        return {}
    loaded = {label: TransformersPolicy.from_path(path) for label, path in policies.items()}
    out: dict[str, dict[str, list[dict]]] = {}
    for name in envs:
        env = get_env(name)
        tasks = eval_tasks(env, "heldout", generated, run_dir=run_dir, cache_dir=cache_dir).tasks
        tasks = tasks[:limit]
        app, digest = build_app(env), dataset_hash(tasks)
        out[name] = {}
        for label, policy in loaded.items():
            lineage = Lineage(run_dir.name, 0, 0, f"transformers:{policies[label]}", env.name,
                              env.version, digest)  # fmt: skip
            rows, _ = evaluate_policy(
                env, app, policy, tasks, greedy=True, max_new_tokens=max_new_tokens, seed=seed,
                out_dir=run_dir / "eval" / f"heldout-{name}-{label}", lineage=lineage,
            )  # fmt: skip
            out[name][label] = rows
    return out
