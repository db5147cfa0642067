"""Stage 1: tasks generated, deduplicated and split (:mod:`gymflow.lifecycle.stages.generate`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import TaskData
from gymflow.lifecycle.stages import generate
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="generate_tasks", **STAGE_OPTIONS)
def generate_tasks(run: RunContext, cfg: LifecycleConfig) -> TaskData:
    """The run's train, val and held-out task tables, their hash and coverage report."""
    return generate.generate_tasks(run, cfg)
