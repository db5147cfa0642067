"""One rollout collection from names and paths: what ``gymflow rollouts collect`` and the
Prefect flow ``flows/collect.py`` both run (load the env, tasks and policy; pick the run id).

:class:`CollectOptions` is the one declaration of the collection's options: the command line
builds it from its flags (their help is the fields' descriptions) and the flow takes it as its
parameter. Importing this module stays light (the engine loads in :func:`run_collect`).
``engine="ray"`` runs the episodes on Ray workers (:mod:`gymflow.rollout.ray_engine`); the
plan, the rows and the folder are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS

if TYPE_CHECKING:
    from collections.abc import Callable

    from gymflow.env.environment import Environment
    from gymflow.rollout.engine import CollectReport, CollectSettings, EpisodeRunner

    RunnerFactory = Callable[[Environment, CollectSettings], EpisodeRunner]


class CollectOptions(BaseModel):
    """What to collect, where, and how (``gymflow rollouts collect --help`` shows the same)."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(description="Environment to collect in.")
    tasks: Path = Field(description="Tasks, JSONL, in the format `fmt` (--format).")
    policy: str = Field(
        description="transformers:PATH, vllm:PATH, openai:URL?model=M, or scripted:ENV (gold)."
    )
    out: Path = Field(description="Folder: rollouts/part-*.parquet, tasks, collect.json.")
    fmt: str = Field("gymflow", description="Task format (as for gymflow verify).")
    num_repeats: int = Field(4, ge=1, description="G: samples per task (>= 1).")
    concurrency: int = Field(32, ge=1, description="Episodes live at once (rows per part; >= 1).")
    run_id: str | None = Field(
        None, description="Resume this run (default: the one in `out`, or new)."
    )
    env_url: str | None = Field(
        None, description="A running `gymflow env serve` (default: in-process)."
    )
    iteration: int = Field(0, ge=0, description="Training iteration recorded in every row.")
    policy_version: int = Field(0, ge=0, description="Policy version recorded in every row.")
    seed: int = Field(0, description="Base of every rollout's sampling seed.")
    temperature: float = Field(1.0, description="Sampling temperature.")
    max_new_tokens: int = Field(
        DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn (>= 1)."
    )
    max_completion_tokens: int = Field(
        256, ge=1, description="Tokens per episode, model and tool tokens (>= 1)."
    )
    progress: bool | None = Field(
        None,
        description="Progress bar on stderr (default: when stderr is a terminal; the Prefect "
        "flow never draws one).",
    )
    retry_failed: bool = Field(
        False,
        description="Also re-run this run's rollouts that got no reward (env or policy faults).",
    )
    engine: Literal["local", "ray"] = Field(
        "local",
        description="Where episodes run: local (this process) or ray (Ray actors, each a policy "
        "and an env client; rows are written here the same way).",
    )
    ray_address: str | None = Field(
        None,
        description="A running Ray cluster (ray start --head prints it; default: a local one "
        "started and stopped here). With --engine ray.",
    )
    ray_workers: int = Field(
        2, ge=1, description="Rollout workers (Ray actors), each a window of `concurrency`."
    )

    @field_validator("ray_address")
    @classmethod
    def _address_needs_ray(cls, address: str | None, info: ValidationInfo) -> str | None:
        if address and info.data.get("engine") != "ray":
            raise ValueError("a Ray address is for the ray engine (--engine ray)")
        return address


def run_collect(options: CollectOptions, runner: RunnerFactory | None = None) -> CollectReport:
    """Collect into ``options.out``; raises ``GymflowError`` with a kind for any bad input.

    ``retry_failed``: also re-run the rollouts of the run whose latest row has no reward.
    ``runner(env, settings)``: run the episodes there (the collect flow's mapped shards).
    """
    from gymflow.data.task_files import load_tasks
    from gymflow.env.registry import get_env
    from gymflow.policy.spec import load_policy
    from gymflow.rollout.engine import CollectSettings, collect
    from gymflow.rollout.episode import Sampling

    o = options
    environment = get_env(o.env)
    task_list = list(load_tasks(environment, o.tasks, o.fmt).values())
    if not task_list:
        raise GymflowError(FailureKind.BAD_REQUEST, f"{o.tasks}: no tasks")
    settings = CollectSettings(
        run_id=o.run_id or resumable_run_id(o.out),
        num_repeats=o.num_repeats,
        concurrency=o.concurrency,
        iteration=o.iteration,
        policy_version=o.policy_version,
        policy_spec=o.policy,
        seed=o.seed,
        sampling=Sampling(
            max_new_tokens=o.max_new_tokens,
            # a scripted policy's "tokens" are UTF-8 bytes: a model's budget would cut it short
            max_completion_tokens=(
                max(o.max_completion_tokens, 1 << 16)
                if o.policy.startswith("scripted:")
                else o.max_completion_tokens
            ),
            temperature=o.temperature,
        ),
        reward_range=environment.reward_range,
        progress=o.progress,
        retry_failed=o.retry_failed,
    )
    if runner is not None:
        made = runner(environment, settings)
        return collect(
            environment, None, task_list, o.out, settings, env_url=o.env_url, runner=made
        )
    if o.engine == "ray":
        from gymflow.rollout.ray_engine import collect_on_ray

        return collect_on_ray(
            environment, task_list, o.out, settings, o.ray_workers, o.ray_address, o.env_url
        )
    loaded = load_policy(o.policy, tasks=task_list)
    return collect(environment, loaded, task_list, o.out, settings, env_url=o.env_url)


def resumable_run_id(out: Path) -> str:
    """The run already in ``out`` (so a plain re-run resumes it), else a new id."""
    from gymflow.core.ids import new_run_id
    from gymflow.rollout.store import ROLLOUTS_DIR, read_parts

    folder = out / ROLLOUTS_DIR
    rows = read_parts(folder) if folder.is_dir() else None
    if rows is not None and not rows.is_empty():  # empty: killed before its first part
        ids = sorted(set(rows["run_id"].to_list()))
        if len(ids) == 1:
            return ids[0]
    return new_run_id()
