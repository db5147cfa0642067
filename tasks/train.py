"""Stages 4 and 5: SFT, then GRPO beside its SFT control (:mod:`gymflow.lifecycle.stages.training`).

:func:`train_grpo_with_control` is what the flow calls: GRPO and the controls ``cfg.controls``
names. The SFT control runs beside GRPO as a concurrent Prefect task run (the two share the CPU
and stop at one wall time, :mod:`gymflow.train.twin_clock`), or after it with GRPO's wall time
as its budget; the RFT control runs after GRPO, for GRPO's training wall time.
"""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import (
    Checkpoint,
    GRPOResult,
    RFTControlResult,
    SFTControlResult,
    SFTResult,
    TaskData,
)
from gymflow.lifecycle.stages import training
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="sft", **STAGE_OPTIONS)
def sft_stage(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> SFTResult:
    """SFT on the run's demonstrations until the start samples well enough for GRPO."""
    return training.train_sft(run, cfg, data, policy)


@task(name="grpo", **STAGE_OPTIONS)
def grpo_stage(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: Checkpoint,
    threads: int | None = None,
) -> GRPOResult:
    """GRPO from ``start``; ``threads`` caps torch's CPU threads (the control runs beside it)."""
    return training.train_grpo(run, cfg, data, start, threads)


@task(name="sft_control", **STAGE_OPTIONS)
def sft_control_stage(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: Checkpoint,
    budget_s: float | None,
    threads: int = 1,
) -> SFTControlResult:
    """More SFT from GRPO's start for GRPO's wall time (``budget_s=None``: beside GRPO)."""
    return training.train_sft_control(run, cfg, data, start, budget_s, threads)


@task(name="rft_control", **STAGE_OPTIONS)
def rft_control_stage(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, start: Checkpoint, budget_s: float
) -> RFTControlResult:
    """Online RFT from GRPO's start for GRPO's training wall time."""
    return training.train_rft_control(run, cfg, data, start, budget_s)


def train_grpo_with_control(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, start: Checkpoint
) -> tuple[GRPOResult, SFTControlResult | None, RFTControlResult | None]:
    """GRPO from ``start`` and the controls ``cfg.controls`` names (see the module)."""
    control = None
    if "sft" not in cfg.controls:
        candidate = grpo_stage(run, cfg, data, start)
    elif not cfg.control_beside_grpo or cfg.train_processes > 1:  # N processes: one at a time
        candidate = grpo_stage(run, cfg, data, start)
        control = sft_control_stage(run, cfg, data, start, candidate.train_wall_s)
    else:
        threads = training.threads_beside_grpo(run)
        beside = sft_control_stage.submit(run, cfg, data, start, None, threads)
        candidate = grpo_stage(run, cfg, data, start, threads)
        control = beside.result()
    rft = None
    if "rft" in cfg.controls:
        rft = rft_control_stage(run, cfg, data, start, candidate.train_wall_s)
    return candidate, control, rft
