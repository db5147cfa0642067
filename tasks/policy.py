"""Stage 0: the policy the run starts from (:mod:`gymflow.lifecycle.stages.policy`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import ResolvedPolicy
from gymflow.lifecycle.stages import policy
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="resolve_policy", **STAGE_OPTIONS)
def resolve_policy(run: RunContext, cfg: LifecycleConfig) -> ResolvedPolicy:
    """``cfg.model_path`` if set, else the champion, else a fresh tiny model."""
    return policy.resolve_policy(run, cfg)
