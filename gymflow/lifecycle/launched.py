"""The lifecycle's SFT, SFT control and GRPO on several processes (``train_processes`` > 1).

The stages hand their training to :func:`gymflow.train.launch.launch` (``accelerate launch``,
DDP: gloo on CPUs, NCCL with a GPU per process) with a job that names :func:`stage_hooks`, which
every launched process enters to rebuild what a JSON job cannot carry: the run's environments
(in-process apps), SFT's sampled-success evaluation (its target and its pick), the one
checkpoint rule's greedy validation of GRPO and of the control, and GRPO's rollout lineage,
rollout folder and curriculum (from the preflight the stage ran before launching). Evaluations
run on rank 0 while the others wait (:func:`gymflow.train.launch.on_rank_0`).

What a launched stage does not do that an in-process one does: log each step to MLflow as it
goes (the stage logs the result, validation scores included, afterwards), print per-step
progress, or mix environments (the config refuses it: ``LifecycleConfig.train_processes``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.train.launch import JobHooks, LaunchJob, launch

Role = Literal["sft", "sft_control", "grpo"]


def launched(
    cfg: LifecycleConfig,
    role: Role,
    start: str,
    out: Path,
    settings: dict,
    val_tasks: str,
    demos: list[dict] | None,
    budget_s: float | None = None,
    tasks: str | None = None,
    lineage: dict | None = None,
    rollout_dir: str | None = None,
) -> dict:
    """One training stage on ``cfg.train_processes`` processes; rank 0's result, as
    ``run_sft`` / ``run_grpo`` return it in one process."""
    out.mkdir(parents=True, exist_ok=True)
    demo_file = None
    if demos is not None:
        demo_file = out / "launch_demos.jsonl"
        write_jsonl_atomic(demo_file, demos)
    job = LaunchJob(
        stage="grpo" if role == "grpo" else "sft",
        model_path=start,
        out_dir=str(out),
        settings=settings,
        demos=str(demo_file) if demo_file else None,
        env=cfg.env if role == "grpo" else None,
        tasks=tasks,
        time_budget_s=budget_s,
        hooks=f"{__name__}:stage_hooks",
        hooks_args={
            "config": cfg.model_dump(mode="json"),
            "role": role,
            "val_tasks": val_tasks,
            "lineage": lineage,
            "rollout_dir": rollout_dir,
        },
    )
    return launch(job, cfg.train_processes)


@contextlib.contextmanager
def stage_hooks(job: LaunchJob) -> Iterator[JobHooks]:
    """In every launched process: the stage's closures (:class:`JobHooks`)."""
    from gymflow.data.task_table import read_tasks
    from gymflow.lifecycle.training_inputs import environment_servers, validation_success

    args = job.hooks_args
    cfg = LifecycleConfig.model_validate(args["config"])
    role: Role = args["role"]
    val = read_tasks(Path(args["val_tasks"]))
    with environment_servers(cfg) as servers:
        hooks = JobHooks()
        if role == "sft":
            hooks.evaluate = validation_success(cfg, servers, val, greedy=False)
        elif cfg.grpo.validate_every is not None:  # the one rule of both candidates
            hooks.choose = validation_success(cfg, servers, val, greedy=True)
            hooks.choose_every = cfg.grpo.validate_every
        if role == "grpo":
            hooks.source = _grpo_source(cfg, job, args)
        yield hooks


def _grpo_source(cfg: LifecycleConfig, job: LaunchJob, args: dict) -> dict:
    """GRPO's rollout rows in the run folder with the run's lineage, and the curriculum the
    stage's preflight opened (its ``preflight.json``, read, not sampled again)."""
    from gymflow.data.task_table import read_tasks
    from gymflow.rollout.store import Lineage
    from gymflow.train import readiness
    from gymflow.train.task_pool import TASK_POOL_FILE

    source: dict = {}
    if args.get("lineage"):
        source["lineage"] = Lineage(**args["lineage"])
    if args.get("rollout_dir"):
        source["out_dir"] = Path(args["rollout_dir"])
    folder = Path(job.out_dir)
    ready_file = folder / readiness.PREFLIGHT_FILE
    if cfg.grpo.preflight is not None and ready_file.is_file():
        ready = readiness.Readiness.model_validate_json(ready_file.read_text())
        settings = cfg.grpo.model_copy(update={"seed": cfg.seed})
        pool = read_tasks(Path(job.tasks))
        _, task_pool = readiness.drawn_pool(ready, pool, settings, folder / TASK_POOL_FILE)
        if task_pool is not None:
            source["task_pool"] = task_pool
    return source
