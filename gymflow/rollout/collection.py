"""One rollout collection from names and paths: what ``gymflow rollouts collect`` and the
Prefect flow ``flows/collect.py`` both run (load the env, tasks and policy; pick the run id)."""

from __future__ import annotations

from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.rollout.engine import ROLLOUTS_DIR, CollectReport, CollectSettings, collect
from gymflow.rollout.episode import Sampling


def run_collect(
    env: str,
    tasks: Path,
    policy: str,
    out: Path,
    fmt: str = "gymflow",
    num_repeats: int = 4,
    concurrency: int = 32,
    run_id: str | None = None,
    env_url: str | None = None,
    iteration: int = 0,
    policy_version: int = 0,
    seed: int = 0,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    max_completion_tokens: int = 256,
    progress: bool | None = None,
    retry_failed: bool = False,
) -> CollectReport:
    """Collect into ``out``; raises ``GymflowError`` with a kind for any bad input.

    ``retry_failed``: also re-run the rollouts of the run whose latest row has no reward.
    """
    from gymflow.data.task_files import load_tasks
    from gymflow.env.registry import get_env
    from gymflow.policy.spec import load_policy

    environment = get_env(env)
    task_list = list(load_tasks(environment, Path(tasks), fmt).values())
    if not task_list:
        raise GymflowError(FailureKind.BAD_REQUEST, f"{tasks}: no tasks")
    settings = CollectSettings(
        run_id=run_id or resumable_run_id(Path(out)),
        num_repeats=num_repeats,
        concurrency=concurrency,
        iteration=iteration,
        policy_version=policy_version,
        policy_spec=policy,
        seed=seed,
        sampling=Sampling(
            max_new_tokens=max_new_tokens,
            # a scripted policy's "tokens" are UTF-8 bytes: a model's budget would cut it short
            max_completion_tokens=(
                max(max_completion_tokens, 1 << 16)
                if policy.startswith("scripted:")
                else max_completion_tokens
            ),
            temperature=temperature,
        ),
        reward_range=environment.reward_range,
        progress=progress,
        retry_failed=retry_failed,
    )
    loaded = load_policy(policy, tasks=task_list)
    return collect(environment, loaded, task_list, Path(out), settings, env_url=env_url)


def resumable_run_id(out: Path) -> str:
    """The run already in ``out`` (so a plain re-run resumes it), else a new id."""
    from gymflow.core.ids import new_run_id
    from gymflow.rollout.store import read_parts

    folder = out / ROLLOUTS_DIR
    rows = read_parts(folder) if folder.is_dir() else None
    if rows is not None and not rows.is_empty():  # empty: killed before its first part
        ids = sorted(set(rows["run_id"].to_list()))
        if len(ids) == 1:
            return ids[0]
    return new_run_id()
