"""The gate's general-capability check: policies on task sets the run does not train on.

Two kinds of set (:class:`GeneralSet`):

* an environment's held-out split (``GateSettings.general_envs``: a tool_call run is also
  checked on math and games): its tasks as :func:`gymflow.eval.splits.eval_tasks` finds them
  (the run's own rows of that environment if it has any, else the split regenerated with the
  run's task settings), the first ``general_n``;
* an external set (``GateSettings.general_sets``: ``bfcl:simple_python``,
  ``bfcl:live_simple``), a public benchmark's held-out tasks fetched from the package registry
  (:mod:`gymflow.data.data_catalog`), the first ``general_sets_n`` in the file's order.

Every policy runs greedy on the same tasks with the same seeds, so the gate's comparison with
the start is paired.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gymflow.data.data_catalog import SETS
from gymflow.data.task_table import dataset_hash
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.splits import GeneratedSplit, eval_tasks
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import Lineage


@dataclass(frozen=True)
class GeneralSet:
    """One set of the check: ``name`` is an environment (its held-out split) or an external
    set's name; ``limit`` its first tasks."""

    name: str
    env: str
    split: str
    limit: int

    @property
    def folder(self) -> str:
        """The episodes' folder under ``<run>/eval/`` (without the policy's label)."""
        return f"heldout-{self.name}" if self.split == "heldout" else self.name.replace(":", "-")


def general_envs(wanted: list[str], trained: set[str]) -> list[str]:
    """``wanted`` without the environments the run trains on, in order, once each.

    >>> general_envs(["math", "tool_call", "games", "math"], {"tool_call"})
    ['math', 'games']
    """
    return [e for i, e in enumerate(wanted) if e not in trained and e not in wanted[:i]]


def env_sets(envs: list[str], limit: int) -> list[GeneralSet]:
    return [GeneralSet(env, env, "heldout", limit) for env in envs]


def external_sets(names: list[str], limit: int) -> list[GeneralSet]:
    """
    >>> external_sets(["bfcl:live_simple"], 100)
    [GeneralSet(name='bfcl:live_simple', env='tool_call', split='bfcl:live_simple', limit=100)]
    """
    return [GeneralSet(name, SETS[name].env, name, limit) for name in names]


def evaluate_general(
    sets: list[GeneralSet],
    policies: dict[str, str],
    generated: GeneratedSplit,
    seed: int,
    max_new_tokens: int,
    run_dir: Path,
    cache_dir: Path | None = None,
) -> dict[str, dict[str, list[dict]]]:
    """``{set name: {label: rows}}`` for every policy (``{label: checkpoint folder}``) on every
    set; episodes are stored under ``run_dir/eval/<set folder>-<label>/`` (the rollout layout),
    and an episode that could not finish fails the check."""
    if not sets:
        return {}
    loaded = {label: TransformersPolicy.from_path(path) for label, path in policies.items()}
    out: dict[str, dict[str, list[dict]]] = {}
    for general in sets:
        env = get_env(general.env)
        found = eval_tasks(env, general.split, generated, run_dir=run_dir, cache_dir=cache_dir)
        tasks = found.tasks[: general.limit]
        app, digest = build_app(env), dataset_hash(tasks)
        out[general.name] = {}
        for label, policy in loaded.items():
            lineage = Lineage(run_dir.name, 0, 0, f"transformers:{policies[label]}", env.name,
                              env.version, digest)  # fmt: skip
            rows, _ = evaluate_policy(
                env, app, policy, tasks, greedy=True, max_new_tokens=max_new_tokens, seed=seed,
                out_dir=run_dir / "eval" / f"{general.folder}-{label}", lineage=lineage,
            )  # fmt: skip
            out[general.name][label] = rows
    return out
