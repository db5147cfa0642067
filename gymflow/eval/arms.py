"""Training arms compared at equal compute: equal wall time, equal samples generated.

An *arm* is one way to spend compute from the same start: the SFT control (more imitation of the
run's demonstrations), online RFT (imitation of the policy's own verified samples,
:mod:`gymflow.train.rft`) and GRPO. Each hands in an :class:`ArmCompute` — what it spent,
and a cost curve (cumulative wall time, samples and examples at its steps) — and its checkpoint
rule's validation history (``[{"step", "success"}]``, step 0 the start; ``validation.json``'s
``history``, :mod:`gymflow.train.checkpoint_choice`).

:func:`at_equal` answers "what had each arm reached when it had spent the same?": for a budget
on one axis (``wall_s``, ``samples_generated`` or ``examples_trained``; by default the least that
every arm reached), each arm's best validated checkpoint among those it had reached within the
budget, ties to the later step — the checkpoint rule, as if training had stopped there. An arm
that spends nothing on an axis (the SFT control generates no samples) has all its checkpoints
within any budget on it, and says so. :func:`budget_curve` repeats it at several budgets.

The validation scores are the checkpoint rule's (greedy, on the val split); held-out figures of
the chosen checkpoints are the gate's and :mod:`gymflow.eval.arm_passk`'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Axis = Literal["wall_s", "samples_generated", "examples_trained"]
AXIS_WORDS = {
    "wall_s": "wall time (s)",
    "samples_generated": "samples generated",
    "examples_trained": "examples trained",
}


class CostPoint(BaseModel):
    """What an arm had spent when step ``step`` ended (cumulative)."""

    step: int
    wall_s: float
    samples_generated: int = 0
    examples_trained: int = 0


class ArmCompute(BaseModel):
    """What one arm spent, in totals and along its steps."""

    arm: str
    steps: int = Field(description="Optimizer steps taken.")
    updates: int = Field(description="Steps that changed the weights (RFT: a step with a success).")
    samples_generated: int = Field(
        0, description="Episodes sampled from the policy being trained (0 for SFT)."
    )
    examples_trained: int = Field(
        0,
        description="Sequences the updates trained on: demonstrations (SFT), verified successes "
        "(RFT), sampled completions (GRPO).",
    )
    tokens_generated: int = Field(0, description="Model tokens sampled for training.")
    tokens_trained: int = Field(0, description="Completion tokens the loss was taken on.")
    wall_s: float = Field(description="Training wall time, validation included.")
    curve: list[CostPoint] = Field(
        default_factory=list,
        description="Cumulative cost at steps (empty: spent evenly over the steps).",
    )

    def spent_at(self, step: int, axis: Axis) -> float:
        """What the arm had spent on ``axis`` when ``step`` ended (step 0: nothing): the last
        curve point at or before it, else an even share of the totals."""
        if step <= 0:
            return 0.0
        known = [p for p in self.curve if p.step <= step]
        if known:
            return float(getattr(known[-1], axis))
        return float(getattr(self, axis)) * min(step, self.steps) / max(1, self.steps)

    def total(self, axis: Axis) -> float:
        return self.spent_at(self.steps, axis) if self.curve else float(getattr(self, axis))


class ArmRecord(BaseModel):
    """An arm's compute and its validation history (``[{"step", "success"}]``)."""

    compute: ArmCompute
    history: list[dict]


class ArmAtBudget(BaseModel):
    """One arm's best validated checkpoint within a budget."""

    arm: str
    step: int
    success: float
    spent: float
    """What it had spent on the axis at that step."""
    reached: float
    """What it spent on the axis in all (the budget may lie beyond it)."""
    free: bool = False
    """The arm spends nothing on this axis: every checkpoint is within any budget."""


class BudgetComparison(BaseModel):
    """Every arm at one budget on one axis."""

    axis: Axis
    budget: float
    arms: list[ArmAtBudget]

    @property
    def leader(self) -> str:
        """The arm with the highest validation success (the first listed of equals)."""
        return max(self.arms, key=lambda a: a.success).arm

    def text(self) -> str:
        """``at equal wall time (s) 120: sft_control 0.625 (step 75), rft 0.688 (step 50)``."""
        parts = [
            f"{a.arm} {a.success:.3f} (step {a.step}{', spends none' if a.free else ''})"
            for a in self.arms
        ]
        return f"at equal {AXIS_WORDS[self.axis]} {self.budget:g}: " + ", ".join(parts)


def at_equal(arms: list[ArmRecord], axis: Axis, budget: float | None = None) -> BudgetComparison:
    """Each arm's best validated checkpoint (ties: the later step) among those it had reached
    within ``budget`` on ``axis``; the default budget is the least total any arm that spends on
    the axis reached. An arm without a validated step within the budget raises."""
    if not arms:
        raise ValueError("at_equal needs at least one arm")
    spending = [a.compute.total(axis) for a in arms if a.compute.total(axis) > 0]
    if budget is None:
        budget = min(spending, default=0.0)
    out = []
    for a in arms:
        free = a.compute.total(axis) == 0
        within = [
            (h["step"], float(h["success"]))
            for h in a.history
            if h.get("success") is not None and a.compute.spent_at(h["step"], axis) <= budget
        ]
        if not within:
            raise ValueError(f"arm {a.compute.arm}: no validated step within {budget:g} {axis}")
        step, success = max(within, key=lambda s: (s[1], s[0]))
        out.append(
            ArmAtBudget(
                arm=a.compute.arm, step=step, success=success,
                spent=a.compute.spent_at(step, axis), reached=a.compute.total(axis), free=free,
            )
        )  # fmt: skip
    return BudgetComparison(axis=axis, budget=budget, arms=out)


def budget_curve(arms: list[ArmRecord], axis: Axis, points: int = 4) -> list[BudgetComparison]:
    """:func:`at_equal` at ``points`` evenly spaced budgets up to the common one."""
    common = at_equal(arms, axis).budget
    return [at_equal(arms, axis, common * (i + 1) / points) for i in range(points)]
