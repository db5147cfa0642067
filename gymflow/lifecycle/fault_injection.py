"""Failures injected on purpose (resume drills, tests): ``GYMFLOW_FAIL_AT``.

* ``GYMFLOW_FAIL_AT=<stage>``: the stage fails on entry, before its MLflow run opens.
* ``GYMFLOW_FAIL_AT=<stage>@step<N>``: a training stage (``sft``, ``grpo``, ``sft_control``)
  fails right after its trainer has saved the first checkpoint at or after step ``N``, so the
  re-run has a checkpoint to resume from.

Several, comma-separated (``sft@step15,grpo@step1``), fail the run at each in turn. Each
fires once per run: a marker file in the run folder (``.injected-failure-<value>``) says it
did, and the next re-run goes past it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

VARIABLE = "GYMFLOW_FAIL_AT"


def maybe_fail(run_dir: Path, stage: str, step: int | None = None) -> None:
    """Raise the injected failure if ``GYMFLOW_FAIL_AT`` names ``stage`` at this point:
    on entry (``step`` None) or at a checkpoint of training step ``step``."""
    for wanted in _points():
        name, _, at = wanted.partition("@step")
        if name != stage or (step is None) != (not at):
            continue
        if step is not None and step < int(at):
            continue
        marker = run_dir / f".injected-failure-{wanted}"
        if not marker.exists():
            _fail(marker, wanted, stage, step)


def _fail(marker: Path, wanted: str, stage: str, step: int | None) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"stage failed once on purpose ({VARIABLE}={wanted})\n")
    where = f"stage {stage}" if step is None else f"stage {stage} after its step-{step} checkpoint"
    raise GymflowError(FailureKind.INJECTED_FAILURE, f"injected failure in {where} ({VARIABLE})")


def fail_after_checkpoint(run_dir: Path, stage: str) -> list:
    """``[TrainerCallback]`` that fails ``stage`` at its checkpoint when ``GYMFLOW_FAIL_AT``
    says ``<stage>@step<N>``; ``[]`` otherwise (nothing is added to the trainer)."""
    if not any(point.startswith(f"{stage}@step") for point in _points()):
        return []
    from transformers import TrainerCallback

    class FailAtCheckpoint(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            maybe_fail(run_dir, stage, state.global_step)
            return control

    return [FailAtCheckpoint()]


def _points() -> list[str]:
    return [p.strip() for p in os.environ.get(VARIABLE, "").split(",") if p.strip()]
