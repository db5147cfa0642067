"""Stage 6: the held-out gate (:mod:`gymflow.lifecycle.stages.gate`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import Checkpoint, GateReport, TaskData
from gymflow.lifecycle.stages import gate
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="heldout_gate", **STAGE_OPTIONS)
def heldout_gate(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    baseline: Checkpoint,
    candidate: Checkpoint,
    control: Checkpoint | None,
    rft: Checkpoint | None = None,
) -> GateReport:
    """``baseline`` is the policy GRPO started from; ``candidate`` GRPO's chosen policy;
    ``control`` the SFT control and ``rft`` the RFT control (when they ran): every one a
    candidate for promotion."""
    return gate.run_heldout_gate(run, cfg, data, baseline, candidate, control, rft)
