"""GRPO's learning-rate schedule follows the further along of the steps and the time budget."""

from __future__ import annotations

import math

import pytest

from gymflow.train.lr_schedule import factor, progress, warmup


def test_progress_is_the_further_along_of_steps_and_time():
    assert progress(50, 250, 10.0, 340.0) == pytest.approx(0.2)  # steps lead
    assert progress(50, 250, 170.0, 340.0) == pytest.approx(0.45)  # the clock leads, less slack
    assert progress(50, 250, 170.0, None) == pytest.approx(0.2)  # no budget: steps only
    assert progress(300, 250, 0.0, None) == 1.0 and progress(1, 250, 999.0, 340.0) == 1.0


def test_a_slow_first_step_does_not_move_a_cap_bound_run():
    """Warm-up makes the first steps slow on the clock; within the slack the steps decide."""
    assert progress(1, 250, 3.0, 340.0) == pytest.approx(1 / 250)
    assert progress(25, 250, 40.0, 340.0) == pytest.approx(25 / 250)


@pytest.mark.parametrize(
    ("kind", "half", "end"), [("constant", 1.0, 1.0), ("linear", 0.5, 0.0), ("cosine", 0.5, 0.0)]
)
def test_factor_falls_from_the_peak_to_zero(kind, half, end):
    assert factor(kind, 0.0) == 1.0
    assert factor(kind, 0.5) == pytest.approx(half)
    assert factor(kind, 1.0) == pytest.approx(end, abs=1e-12)
    assert factor("cosine", 0.25) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_warmup_ramps_to_the_schedule_and_never_trains_at_zero():
    assert [warmup(s, 10) for s in (0, 4, 9, 10, 200)] == pytest.approx([0.1, 0.5, 1.0, 1.0, 1.0])
    assert warmup(0, 0) == 1.0  # off
