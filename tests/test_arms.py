"""Arms compared at equal compute, on synthetic compute records and validation histories.

Three arms from one start (step 0 scores 0.40 for all): the SFT control (fast steps, no samples
generated), online RFT and GRPO (slower steps, 32 samples each). Which arm leads depends on the
budget and its axis, and each figure below is worked out by hand from the records.
"""

from __future__ import annotations

import pytest

from gymflow.eval.arms import ArmCompute, ArmRecord, CostPoint, at_equal, budget_curve


def _sft() -> ArmRecord:
    compute = ArmCompute(
        arm="sft_control", steps=100, updates=100, examples_trained=3200, wall_s=100.0
    )  # no curve: spent evenly, 1 s and 32 demonstrations a step
    history = [{"step": s, "success": v} for s, v in [(0, 0.4), (25, 0.5), (50, 0.6), (75, 0.62), (100, 0.6)]]  # fmt: skip
    return ArmRecord(compute=compute, history=history)


def _rft() -> ArmRecord:
    # steps of 4 s, but the first 10 took 6 s each (sampling a weak start finds few successes)
    curve, wall = [], 0.0
    for step in range(1, 31):
        wall += 6.0 if step <= 10 else 4.0
        curve.append(
            CostPoint(
                step=step, wall_s=wall, samples_generated=32 * step, examples_trained=10 * step
            )
        )
    compute = ArmCompute(
        arm="rft_control", steps=30, updates=28, samples_generated=960, examples_trained=300,
        tokens_generated=30_000, tokens_trained=6_000, wall_s=wall, curve=curve,
    )  # fmt: skip
    history = [{"step": s, "success": v} for s, v in [(0, 0.4), (10, 0.55), (20, 0.7), (30, 0.7)]]
    return ArmRecord(compute=compute, history=history)


def _grpo() -> ArmRecord:
    compute = ArmCompute(
        arm="grpo", steps=25, updates=25, samples_generated=800, examples_trained=800,
        wall_s=125.0,
    )  # fmt: skip  # 5 s and 32 samples a step
    history = [{"step": s, "success": v} for s, v in [(0, 0.4), (5, 0.45), (10, 0.5), (25, 0.75)]]
    return ArmRecord(compute=compute, history=history)


def test_what_a_step_cost_from_the_curve_or_evenly():
    rft, grpo = _rft().compute, _grpo().compute
    assert rft.spent_at(0, "wall_s") == 0.0
    assert rft.spent_at(10, "wall_s") == 60.0 and rft.spent_at(20, "wall_s") == 100.0
    assert rft.total("wall_s") == 140.0 and rft.total("samples_generated") == 960
    assert grpo.spent_at(10, "wall_s") == 50.0 and grpo.spent_at(10, "samples_generated") == 320
    assert grpo.spent_at(40, "wall_s") == 125.0  # never past what it spent


def test_at_equal_wall_time_each_arm_keeps_its_best_step_within_the_budget():
    arms = [_sft(), _rft(), _grpo()]
    cmp = at_equal(arms, "wall_s")
    assert cmp.budget == 100.0  # the least any arm spent: the SFT control's 100 s
    got = {a.arm: (a.step, a.success, a.spent) for a in cmp.arms}
    assert got["sft_control"] == (75, 0.62, 75.0)  # best of steps 0-100
    assert got["rft_control"] == (20, 0.7, 100.0)  # step 20 ended at 100 s exactly
    assert got["grpo"] == (10, 0.5, 50.0)  # step 25 ended at 125 s: over the budget
    assert cmp.leader == "rft_control"
    assert cmp.text().startswith("at equal wall time (s) 100: sft_control 0.620 (step 75)")


def test_ties_go_to_the_later_step_as_in_the_checkpoint_rule():
    cmp = at_equal([_rft()], "wall_s", budget=200.0)
    assert (cmp.arms[0].step, cmp.arms[0].success) == (30, 0.7)


def test_at_equal_samples_an_arm_that_generates_none_has_every_step_within():
    arms = [_sft(), _rft(), _grpo()]
    cmp = at_equal(arms, "samples_generated")
    assert cmp.budget == 800  # GRPO's total, the least of the arms that sample
    got = {a.arm: a for a in cmp.arms}
    assert got["sft_control"].free and got["sft_control"].step == 75
    assert (got["rft_control"].step, got["rft_control"].success) == (20, 0.7)  # 640 samples
    assert (got["grpo"].step, got["grpo"].success) == (25, 0.75)
    assert cmp.leader == "grpo"
    assert "sft_control 0.620 (step 75, spends none)" in cmp.text()


def test_the_budget_curve_shows_the_lead_changing():
    curve = budget_curve([_sft(), _rft(), _grpo()], "wall_s", points=4)
    assert [c.budget for c in curve] == [25.0, 50.0, 75.0, 100.0]
    assert [c.leader for c in curve] == ["sft_control"] * 3 + ["rft_control"]
    early = {a.arm: a.step for a in curve[0].arms}
    assert early == {"sft_control": 25, "rft_control": 0, "grpo": 5}  # RFT's step 10 took 60 s


def test_an_arm_with_nothing_validated_within_the_budget_is_refused():
    with pytest.raises(ValueError, match="no validated step"):
        at_equal(
            [ArmRecord(compute=_grpo().compute, history=[{"step": 25, "success": 0.7}])],
            "wall_s",
            50.0,
        )
    with pytest.raises(ValueError):
        at_equal([], "wall_s")
