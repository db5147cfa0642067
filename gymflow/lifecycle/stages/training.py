"""Stages 4 and 5: SFT on a small demonstration set, then GRPO on the larger task pool.

Demonstrations are the first ``cfg.demos`` train tasks (seeded shuffle) with their gold
answers; GRPO's pool is every other train task and sees only the verifier, never a gold answer.
A mix of environments splits every environment's train tasks so, each with its share of
``cfg.demos``; GRPO draws its batches by the mix's weights, each task scored by its own
environment, and logs reward and success per environment every step.
``sft_control`` spends GRPO's measured wall time on more SFT over the same demonstrations, so
the gain of RL is measured against the cheap alternative too, on every run that trains (SFT
first or not: a run from the champion trains the champion by SFT for GRPO's wall time); with
``control_beside_grpo`` it runs at the same time as GRPO in a spawned process, half the CPU
threads each (:mod:`gymflow.train.twin_clock`). Both hand the gate the step
:mod:`gymflow.train.checkpoint_choice`'s one rule chooses (greedy validation, step 0
included).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from gymflow.core import progress
from gymflow.data.task_table import read_tasks, write_tasks
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.fault_injection import fail_after_checkpoint
from gymflow.lifecycle.launched import launched
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import (
    Checkpoint,
    GRPOResult,
    RFTControlResult,
    SFTControlResult,
    SFTResult,
    TaskData,
)
from gymflow.lifecycle.tracking import metrics_in_background
from gymflow.lifecycle.training_inputs import (
    Servers,
    candidate_choice,
    environment_servers,
    run_demonstrations,
    sft_settings,
    split_demos_and_pool,
    validation_success,
)
from gymflow.rollout.store import ROLLOUTS_DIR, Lineage
from gymflow.train import readiness, twin_clock
from gymflow.train.checkpoint_choice import (
    CONTROL_VALIDATION_METRIC,
    VALIDATION_FILE,
    VALIDATION_METRIC,
    ChosenCheckpoint,
)
from gymflow.train.grpo import RolloutSource, completions_trained, run_grpo
from gymflow.train.grpo_metrics import step_metrics
from gymflow.train.rft import run_rft
from gymflow.train.sft import SAMPLED_SUCCESS_METRIC, run_sft
from gymflow.train.step_progress import step_progress
from gymflow.train.task_pool import TASK_POOL_FILE


def split_train(cfg: LifecycleConfig, data: TaskData):
    """``(demonstrations, GRPO's pool)`` of the run's train tasks
    (:func:`gymflow.lifecycle.training_inputs.split_demos_and_pool`)."""
    return split_demos_and_pool(cfg, read_tasks(data.paths["train"]))


def _val_tasks(data: TaskData) -> list:
    """The run's validation split, which SFT's and both candidates' checkpoint rules score on."""
    return read_tasks(data.paths["val"])


def _demonstrations(
    cfg: LifecycleConfig, data: TaskData, servers: Servers, tokenizer
) -> list[dict]:
    return run_demonstrations(servers, split_train(cfg, data)[0], tokenizer)


def _sft(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: str,
    out: Path,
    budget_s: float | None,
    should_stop=None,
    log_to_mlflow: bool = True,
) -> dict:
    """SFT (or the control, with ``budget_s`` or ``should_stop``) from ``start`` into ``out``,
    resuming from the last checkpoint there; the stage is named after ``out``.

    SFT hands GRPO the step whose *sampled* validation success is best (GRPO needs a start
    that succeeds on samples); the control, a candidate of the gate, is chosen as GRPO is
    (:func:`gymflow.lifecycle.training_inputs.candidate_choice`)."""
    from transformers import AutoTokenizer

    control = budget_s is not None or should_stop is not None
    tokenizer = AutoTokenizer.from_pretrained(start)
    settings = sft_settings(cfg, control=control)
    shown = step_progress(out.name, settings.max_steps, budget_s, logged=("loss",))
    with environment_servers(cfg) as servers:
        demos = _demonstrations(cfg, data, servers, tokenizer)
        if cfg.train_processes > 1:  # the same stage on N processes (the control after GRPO)
            budget = budget_s if budget_s is not None else settings.time_budget_s
            role = "sft_control" if control else "sft"
            result = launched(
                cfg, role, start, out, settings.model_dump(mode="json"),
                str(data.paths["val"]), demos, budget_s=budget,
            )  # fmt: skip
            if log_to_mlflow and control:
                _log_validation(result["validation"])
            elif log_to_mlflow:
                _log_sampled(result["history"])
            return result
        callbacks = [*fail_after_checkpoint(run.dir, out.name), shown]
        val = _val_tasks(data)
        evaluate = None if control else validation_success(cfg, servers, val, greedy=False)
        if control:
            callbacks += candidate_choice(cfg, servers, val, log_to_mlflow=log_to_mlflow,
                                          metric=CONTROL_VALIDATION_METRIC)  # fmt: skip
        return run_sft(
            Path(start), out, demos, settings, evaluate=evaluate, time_budget_s=budget_s,
            log_to_mlflow=log_to_mlflow, should_stop=should_stop, callbacks=callbacks,
        )  # fmt: skip


def train_sft(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> SFTResult:
    with stage(run, "sft") as info:
        result = _sft(run, cfg, data, policy.path, run.dir / "sft", None)
        _log_resumed_from(result)
    return SFTResult(
        path=result["path"],
        steps=result["steps"],
        history=result["history"],
        demos=cfg.demos,
        resumed_from=result["resumed_from"],
        stopped_by=result["stopped_by"],
        samples=result["steps"] * cfg.sft.batch_size,
        processes=result.get("processes", 1),
        stage=info,
    )


def threads_beside_grpo(run: RunContext) -> int:
    """Torch threads for each of GRPO and its control when they train side by side (half the
    CPU each). A failed earlier attempt's GRPO marker is forgotten first, or it would stop the
    control at once."""
    import torch

    twin_clock.forget_failure(run.dir / "grpo")
    return max(1, torch.get_num_threads() // 2)


def train_grpo(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: Checkpoint,
    threads: int | None = None,
) -> GRPOResult:
    """GRPO from ``start``; ``threads`` caps torch's CPU threads (the control runs beside it)."""
    import mlflow
    import torch

    folder = run.dir / "grpo"
    threads_used = threads or torch.get_num_threads()
    with (
        twin_clock.grpo_markers(folder),
        stage(run, "grpo") as info,
        _torch_threads(threads),
        environment_servers(cfg) as servers,
    ):
        env, app = servers[cfg.env]
        _, pool = split_train(cfg, data)
        rollout_dir = run.dir / ROLLOUTS_DIR  # the run folder is a rollout folder: export reads it

        def log_batch(episodes, used, step):
            figures = step_metrics(episodes, used, settings.num_generations, cfg.envs is not None)
            classes = source.task_pool.counts() if source.task_pool is not None else {}
            progress.show(
                reward=figures["rollouts/reward_mean"],
                zero_variance_share=figures["rollouts/zero_variance_share"],
            )
            mlflow.log_metrics(
                figures | {f"task_pool/{kind}": n for kind, n in classes.items()}, step=step
            )

        settings = cfg.grpo.model_copy(update={"seed": cfg.seed})
        ready, task_pool = None, None
        if settings.preflight is not None:  # is the start inside the learnable band?
            ready, pool, task_pool = _preflight(servers, start, pool, settings, folder)
        lineage = Lineage(run.run_id, 0, 0, "grpo", env.name, data.env_version, data.dataset_hash)
        demos = None
        if settings.demo_loss is not None:  # the same demonstrations SFT and its control use
            from transformers import AutoTokenizer

            demos = _demonstrations(cfg, data, servers, AutoTokenizer.from_pretrained(start.path))
        if cfg.train_processes > 1:  # N processes (the curriculum: from preflight.json)
            result = launched(
                cfg, "grpo", start.path, folder, settings.model_dump(mode="json"),
                str(data.paths["val"]), demos,
                tasks=str(write_tasks(pool, folder / "launch_tasks.parquet")),
                lineage=dataclasses.asdict(lineage), rollout_dir=str(run.dir),
            )  # fmt: skip
            _log_validation(result["validation"], VALIDATION_METRIC)
        else:
            mix = {name: pair for name, pair in servers.items() if name != cfg.env}
            source = RolloutSource(
                env, app, pool, settings, run.dir, lineage, on_batch=log_batch,
                pool_file=folder / TASK_POOL_FILE, mix=mix, weights=cfg.env_weights,
                task_pool=task_pool,
            )  # fmt: skip
            callbacks = fail_after_checkpoint(run.dir, "grpo")
            callbacks += [step_progress("grpo", settings.max_steps, settings.time_budget_s)]
            callbacks += candidate_choice(cfg, servers, _val_tasks(data), log_to_mlflow=True)
            with metrics_in_background():
                result = run_grpo(
                    Path(start.path), folder, source, settings, callbacks=callbacks, demos=demos
                )
        _log_resumed_from(result)
        if result["validation"] is not None:  # the step handed to the gate, by validation
            mlflow.log_metric("grpo/chosen_step", result["validation"]["chosen_step"])
            mlflow.log_artifact(str(folder / VALIDATION_FILE))
        choice = result["validation"]
        twin_clock.mark_finished(folder, result["wall_s"], cfg.digest())
        mlflow.log_metrics(
            {f"dynamic_sampling/{k}": v for k, v in result["dynamic_sampling"].items()}
        )
        mlflow.log_artifacts(str(rollout_dir), artifact_path="rollouts")
        mlflow.log_artifacts(result["path"], artifact_path="policy")
    return GRPOResult(
        path=result["path"],
        steps=result["steps"],
        train_wall_s=result["wall_s"],
        resumed_from=result["resumed_from"],
        dynamic_sampling=result["dynamic_sampling"],
        threads=threads_used,
        rollout_dir=str(rollout_dir),
        pool=len(pool),
        start=start.path,
        choice=ChosenCheckpoint(**choice) if choice else None,
        stopped_by=result["stopped_by"],
        samples=completions_trained(result["steps"], cfg.grpo),
        preflight=ready.model_dump() if ready is not None else None,
        processes=result.get("processes", 1),
        stage=info,
    )


def _preflight(servers: Servers, start: Checkpoint, pool: list, settings, folder: Path):
    """GRPO's RL-readiness preflight (:mod:`gymflow.train.readiness`): said in one line,
    logged, refused when ``on_outside`` says so; with difficulty levels, the curriculum
    (:func:`~gymflow.train.readiness.drawn_pool`). Returns ``(readiness, pool, task pool or
    None)``."""
    import mlflow

    def report(ready: readiness.Readiness, file: Path) -> None:
        progress.note(ready.message)
        mlflow.log_metrics(readiness.metrics(ready))
        mlflow.log_artifact(str(file))

    return readiness.before_grpo(servers, start.path, pool, settings, folder, report)


def train_sft_control(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: Checkpoint,
    budget_s: float | None,
    threads: int = 1,
) -> SFTControlResult:
    """More SFT from GRPO's start, on the same demonstrations, for GRPO's wall time.

    ``budget_s=None``: beside GRPO, in a spawned process with ``threads`` torch threads (as
    many as GRPO gets), training until its own wall time reaches the one GRPO reports.
    """
    with stage(run, "sft_control") as info:
        if budget_s is not None:
            result = _sft(run, cfg, data, start.path, run.dir / "sft_control", budget_s)
        else:
            result = _control_beside_grpo(run, cfg, data, start.path, threads)
            _log_validation(result["validation"])
        _log_resumed_from(result)
        choice = result["validation"]
        if choice is not None:
            import mlflow

            mlflow.log_metric("sft_control/chosen_step", choice["chosen_step"])
            mlflow.log_artifact(str(run.dir / "sft_control" / VALIDATION_FILE))
    beside = budget_s is None
    return SFTControlResult(
        path=result["path"],
        steps=result["steps"],
        history=choice["history"] if choice else [],
        budget_s=result["grpo_wall_s"] if beside else budget_s,
        beside_grpo=beside,
        resumed_from=result["resumed_from"],
        choice=ChosenCheckpoint(**choice) if choice else None,
        stopped_by=result["stopped_by"],
        samples=result["steps"] * cfg.sft.batch_size,
        processes=result.get("processes", 1),
        stage=info,
    )


def _control_beside_grpo(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, start: str, threads: int
) -> dict:
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        child = pool.submit(_control_child, run, cfg, data, start, threads, os.getpid())
        return child.result()


RFT_VALIDATION_METRIC = "rft_control/val_greedy_success"
"""The RFT control's checkpoint-rule scores in MLflow (step = its step)."""


def train_rft_control(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, start: Checkpoint, budget_s: float
) -> RFTControlResult:
    """Online RFT (:mod:`gymflow.train.rft`) from GRPO's start on GRPO's task pool, for
    ``budget_s`` of training (GRPO's training wall time), its checkpoint chosen by GRPO's rule
    on the same validation tasks. It runs after GRPO: three trainers at once would split the
    CPU three ways."""
    import mlflow

    folder = run.dir / "rft_control"
    with stage(run, "rft_control") as info, environment_servers(cfg) as servers:
        env, app = servers[cfg.env]
        _, pool = split_train(cfg, data)
        settings = cfg.rft.model_copy(update={"time_budget_s": budget_s, "seed": cfg.seed})
        callbacks = fail_after_checkpoint(run.dir, "rft_control")
        callbacks += [step_progress("rft_control", settings.max_steps, budget_s)]
        callbacks += candidate_choice(
            cfg, servers, _val_tasks(data), log_to_mlflow=True, metric=RFT_VALIDATION_METRIC
        )
        mix = {name: pair for name, pair in servers.items() if name != cfg.env}
        with metrics_in_background():
            result = run_rft(
                Path(start.path), folder, env, app, pool, settings, callbacks=callbacks, mix=mix,
                weights=cfg.env_weights, arm="rft_control",
            )  # fmt: skip
        _log_resumed_from(result)
        choice = result["validation"]
        if choice is not None:
            mlflow.log_metric("rft_control/chosen_step", choice["chosen_step"])
        ledger = result["compute"]
        mlflow.log_metrics(
            {f"rft_control/{k}": v for k, v in ledger.items() if isinstance(v, int | float)}
        )
    return RFTControlResult(
        path=result["path"],
        steps=result["steps"],
        history=choice["history"] if choice else [],
        budget_s=budget_s,
        resumed_from=result["resumed_from"],
        choice=ChosenCheckpoint(**choice) if choice else None,
        stopped_by=result["stopped_by"],
        compute=ledger,
        stage=info,
    )


def _control_child(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: str,
    threads: int,
    parent_pid: int,
) -> dict:
    """In the spawned process: GRPO's thread count, stop at GRPO's wall time (its marker)."""
    import torch

    from gymflow.lifecycle.home import quiet_libraries

    quiet_libraries()  # a spawned interpreter starts with the default warning filters
    progress.configure(quiet=True)  # GRPO's progress speaks for both

    torch.set_num_threads(threads)
    clock = twin_clock.TwinClock(run.dir / "grpo", cfg.digest(), parent_pid)
    out = run.dir / "sft_control"
    result = _sft(run, cfg, data, start, out, None, should_stop=clock, log_to_mlflow=False)
    return {**result, "grpo_wall_s": clock.budget_s}  # the wall time it matched


def _log_resumed_from(result: dict) -> None:
    """The checkpoint the trainer resumed from (``none``: from the start), a stage-run param."""
    import mlflow

    mlflow.log_param("resumed_from", result["resumed_from"] or "none")


def _log_validation(choice: dict | None, metric: str = CONTROL_VALIDATION_METRIC) -> None:
    """A candidate's validation scores, logged after training where the training process
    logged nothing itself (the control beside GRPO, a launched stage)."""
    import mlflow

    for point in choice["history"] if choice else []:
        mlflow.log_metric(metric, point["success"], step=point["step"])


def _log_sampled(history: list[dict]) -> None:
    """SFT's sampled validation scores, logged after a launched SFT (which logs nothing)."""
    import mlflow

    for point in history:
        mlflow.log_metric(SAMPLED_SUCCESS_METRIC, point["sampled_success"], step=point["step"])


@contextlib.contextmanager
def _torch_threads(threads: int | None):
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
