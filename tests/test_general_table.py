"""The general-capability rows of a run's table and report: a skipped set says so."""

import doctest

from gymflow.lifecycle import summary
from gymflow.lifecycle.summary import general_table_rows


def test_the_summary_module_examples_hold():
    assert doctest.testmod(summary).failed == 0


def test_a_set_skipped_at_the_floor_says_so_and_a_judged_one_shows_its_gain():
    skipped = {
        "n": 32,
        "success": {"baseline": 0.0009},
        "delta_success": {},
        "skipped": "the start scores 0.001 … within the margin 0.05 of the floor: nothing to lose",
    }
    judged = {
        "n": 40,
        "success": {"baseline": 0.5, "grpo": 0.45},
        "delta_success": {"grpo": {"delta": -0.05, "ci95": [-0.12, 0.02]}},
    }
    rows = general_table_rows({"general": {"math": skipped, "code": judged}})
    floor = "skipped: start at the floor"
    assert rows == [
        ["math", "32", "0.001", "—", floor, "—", floor],
        # the control failed an earlier check: not evaluated there, and no gain to show
        ["code", "40", "0.500", "0.450", "-5.0 [-12.0, +2.0]", "—", "—"],
    ]
