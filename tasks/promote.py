"""Stage 7: the gate's choice in the MLflow registry (:mod:`gymflow.lifecycle.stages.promote`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import GateReport, Registration, ResolvedPolicy, TaskData
from gymflow.lifecycle.stages import promote as promotion
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="promote", **STAGE_OPTIONS)
def promote(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: ResolvedPolicy,
    gate: GateReport,
) -> Registration:
    """Register the chosen candidate as ``challenger``; ``champion`` when the gate passed."""
    return promotion.promote_candidate(run, cfg, data, start, gate)
