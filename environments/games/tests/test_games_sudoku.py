"""Sudoku: unique, seeded puzzles at the asked clue count; the strict reader; partial credit."""

from __future__ import annotations

import itertools
import random

import pytest

from gymflow.environments.games.sudoku import (
    SudokuBoard,
    count_solutions,
    make_puzzle,
    read_grid,
    render,
    score,
    units,
)


def all_4x4_grids() -> list[str]:
    """Every valid 4×4 sudoku by brute force (288), independent of the solver under test."""
    rows = ["".join(p) for p in itertools.permutations("1234")]
    grids = [""]
    for _ in range(4):  # add rows that clash with no column so far, then check the boxes
        grids = [g + r for g in grids for r in rows if all(r[c] not in g[c::4] for c in range(4))]
    return [g for g in grids if all(len({g[i] for i in unit}) == 4 for unit in units(4))]


def test_4x4_puzzles_have_exactly_one_completion_by_brute_force():
    grids = all_4x4_grids()
    assert len(grids) == 288
    rng = random.Random(5)
    for clues in (4, 5, 6, 8):
        for _ in range(10):
            p = make_puzzle(4, clues, rng)
            matches = [g for g in grids if all(c in (".", g[i]) for i, c in enumerate(p.puzzle))]
            assert matches == [p.solution]
            assert p.clues >= clues and count_solutions(p.puzzle, 4) == 1


def test_9x9_puzzles_are_unique_at_the_asked_clue_count_and_seeded():
    puzzles = [make_puzzle(9, clues, random.Random(clues)) for clues in (28, 34, 40)]
    for clues, p in zip((28, 34, 40), puzzles, strict=True):
        assert p.clues == clues
        assert count_solutions(p.puzzle, 9) == 1 and count_solutions(p.solution, 9) == 1
        assert all(c in (".", p.solution[i]) for i, c in enumerate(p.puzzle))
    assert make_puzzle(9, 34, random.Random(34)) == puzzles[1]
    # the solver counts as the brute force does: 288 grids, capped at the limit
    assert count_solutions("." * 16, 4, limit=1000) == 288
    assert count_solutions("." * 16, 4) == 2
    assert count_solutions("11" + "." * 14, 4) == 0


READS = {
    "plain": ("1234\n3412\n2143\n4321", "1234341221434321"),
    "spaced_with_bars_and_rule": ("12|34\n34|12\n-----\n21|43\n43|21\n", "1234341221434321"),
    "zero_is_blank": ("1204\n3412\n2143\n4321", "12.4341221434321"),
    "prose_first": ("Answer:\n1234\n3412\n2143\n4321", None),
    "five_rows": ("1234\n3412\n2143\n4321\n1234", None),
    "short_row": ("123\n3412\n2143\n4321", None),
    "digit_out_of_range": ("1235\n3412\n2143\n4321", None),
    "empty": ("", None),
}


@pytest.mark.parametrize("case", sorted(READS))
def test_read_grid_takes_a_grid_and_nothing_else(case):
    text, want = READS[case]
    assert read_grid(text, 4) == want


TRUTH = {"size": 4, "puzzle": "1...3...2...4...", "solution": "1234341221434321"}


def test_score_gives_credit_only_for_right_blanks_in_a_valid_grid_that_keeps_the_clues():
    assert score(TRUTH, TRUTH["solution"]).reward == 1.0
    assert score(TRUTH, TRUTH["solution"]).success
    s = score(TRUTH, "1234341.2...4...")
    assert (s.reward, s.success, s.detail) == (5 / 12, False, "5 of 12 blank cells right")
    assert s.components == {"grid": 1.0, "clues": 1.0, "valid": 1.0, "cells": 5 / 12}
    assert score(TRUTH, TRUTH["puzzle"]).reward == 0.0  # unchanged: nothing filled
    relabelled = TRUTH["solution"].translate(str.maketrans("12", "21"))
    assert "changes" in score(TRUTH, relabelled).detail and score(TRUTH, relabelled).reward == 0
    repeated = "1134" + TRUTH["solution"][4:]
    assert score(TRUTH, repeated).detail == "a digit repeats in a unit"
    none = score(TRUTH, None)
    assert (none.reward, none.failure_kind) == (0.0, "invalid_json")


def test_the_board_refuses_clues_and_out_of_range_cells():
    board = SudokuBoard.from_truth(TRUTH)
    assert board.place(1, 2, 2)["blanks_left"] == 11
    for args, message in [((1, 1, 2), "is a clue"), ((5, 1, 1), "1..4"), ((1, 2, 5), "digit")]:
        with pytest.raises(ValueError, match=message):
            board.place(*args)
    board.place(1, 2, 0)
    assert board.grid == TRUTH["puzzle"] and board.placed == 2
    assert render(board.grid, 4).splitlines()[0] == "1..."
