"""Stage 3: the baseline on val, and whether SFT runs first
(:mod:`gymflow.lifecycle.stages.evaluate`)."""

from __future__ import annotations

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import BaselineEval, Checkpoint, TaskData
from gymflow.lifecycle.stages import evaluate
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="baseline_eval", **STAGE_OPTIONS)
def baseline_eval(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> BaselineEval:
    """The current policy on val; the SFT decision with its reason."""
    return evaluate.evaluate_baseline(run, cfg, data, policy)
