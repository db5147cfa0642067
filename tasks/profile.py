"""Stage 2: the verifier profiled on samples, gold answers and probes
(:mod:`gymflow.lifecycle.stages.profile`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import Checkpoint, TaskData, VerifierProfile
from gymflow.lifecycle.stages import profile
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="profile_verifier", **STAGE_OPTIONS)
def profile_verifier_stage(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> VerifierProfile:
    """Stops the flow when the verifier is non-deterministic, errs, rewards a probe above its
    ceiling or rejects a gold answer (the report published first)."""
    return profile.profile_verifiers(run, cfg, data, policy)
