"""The verifier drift sentinel (:mod:`gymflow.lifecycle.stages.drift`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import DriftCheck, TaskData
from gymflow.lifecycle.stages import drift
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="verifier_drift", **STAGE_OPTIONS)
def verifier_drift(run: RunContext, cfg: LifecycleConfig, data: TaskData) -> DriftCheck:
    """Stops the flow when the champion's stored held-out verdicts flip beyond the threshold."""
    return drift.check_verifier_drift(run, cfg, data)
