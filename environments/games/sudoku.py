"""Sudoku: seeded puzzles with exactly one solution, a strict grid reader, and the score.

A grid is a string of ``size * size`` characters, row by row, ``.`` for a blank (4×4 with 2×2
boxes, 9×9 with 3×3 boxes). Difficulty is the number of clues: the generator removes cells in
a seeded order for as long as the solution stays unique, down to the asked clue count (a
puzzle that cannot lose more cells keeps a few more; ``clues`` is the count it has).

Solving is a small bitmask backtracker with the fewest-candidates cell first; it counts
solutions up to two, which is all uniqueness needs (~1 ms for a 9×9 of 30 clues). No library:
the PyPI solvers either solve only (no counting) or pull in a SAT solver for 9×9 grids.

Score (partial credit, pure): the answer grid must keep every clue and repeat no digit in a row,
column or box (else 0); then the reward is the fraction of the puzzle's blank cells that hold
the solution's digit. Only the solution scores 1.0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score

BLANK = "."


def box_side(size: int) -> int:
    side = {4: 2, 9: 3}.get(size)
    if side is None:
        raise ValueError(f"sudoku size must be 4 or 9, not {size}")
    return side


def units(size: int) -> list[list[int]]:
    """Cell indices of every row, column and box."""
    side = box_side(size)
    rows = [[r * size + c for c in range(size)] for r in range(size)]
    cols = [[r * size + c for r in range(size)] for c in range(size)]
    boxes = [
        [(br + r) * size + bc + c for r in range(side) for c in range(side)]
        for br in range(0, size, side)
        for bc in range(0, size, side)
    ]
    return rows + cols + boxes


def count_solutions(grid: str, size: int, limit: int = 2) -> int:
    """Solutions of ``grid`` (``0`` for a grid with a repeated digit), counted up to ``limit``."""
    side, full = box_side(size), (1 << size) - 1
    rows, cols, boxes = [0] * size, [0] * size, [0] * size
    blanks = []
    for i, ch in enumerate(grid):
        r, c = divmod(i, size)
        b = (r // side) * side + c // side
        if ch == BLANK:
            blanks.append((r, c, b))
            continue
        bit = 1 << (int(ch) - 1)
        if (rows[r] | cols[c] | boxes[b]) & bit:
            return 0
        rows[r], cols[c], boxes[b] = rows[r] | bit, cols[c] | bit, boxes[b] | bit

    def solve(todo: list[tuple[int, int, int]]) -> int:
        if not todo:
            return 1
        # the blank with the fewest candidates first: the search stays tiny
        best, best_free = 0, -1
        for k, (r, c, b) in enumerate(todo):
            free = full & ~(rows[r] | cols[c] | boxes[b])
            if best_free < 0 or free.bit_count() < best_free.bit_count():
                best, best_free = k, free
                if free.bit_count() <= 1:
                    break
        r, c, b = todo[best]
        rest = todo[:best] + todo[best + 1 :]
        found = 0
        free = best_free
        while free and found < limit:
            bit = free & -free
            free ^= bit
            rows[r], cols[c], boxes[b] = rows[r] | bit, cols[c] | bit, boxes[b] | bit
            found += solve(rest)
            rows[r], cols[c], boxes[b] = rows[r] ^ bit, cols[c] ^ bit, boxes[b] ^ bit
        return found

    return solve(blanks)


def solved_grid(size: int, rng: random.Random) -> str:
    """A random complete grid: the base pattern under random band, row and digit shuffles."""
    side = box_side(size)

    def order() -> list[int]:
        bands = rng.sample(range(side), side)
        return [band * side + line for band in bands for line in rng.sample(range(side), side)]

    rows, cols, digits = order(), order(), rng.sample(range(1, size + 1), size)
    pattern = [
        [(side * (r % side) + r // side + c) % size for c in range(size)] for r in range(size)
    ]
    return "".join(str(digits[pattern[r][c]]) for r in rows for c in cols)


@dataclass(frozen=True)
class Puzzle:
    size: int
    puzzle: str
    solution: str

    @property
    def clues(self) -> int:
        return sum(ch != BLANK for ch in self.puzzle)


def make_puzzle(size: int, clues: int, rng: random.Random) -> Puzzle:
    """A puzzle with a unique solution and ``clues`` clues (more if no cell can go)."""
    solution = solved_grid(size, rng)
    cells = list(solution)
    for i in rng.sample(range(size * size), size * size):
        if sum(ch != BLANK for ch in cells) <= clues:
            break
        keep, cells[i] = cells[i], BLANK
        if count_solutions("".join(cells), size) != 1:
            cells[i] = keep
    return Puzzle(size, "".join(cells), solution)


@dataclass
class SudokuBoard:
    """A session's grid: the tools write into blanks, never over a clue."""

    size: int
    puzzle: str
    cells: list[str]
    placed: int = 0

    @classmethod
    def from_truth(cls, truth: dict) -> SudokuBoard:
        return cls(truth["size"], truth["puzzle"], list(truth["puzzle"]))

    @property
    def grid(self) -> str:
        return "".join(self.cells)

    def place(self, row: int, col: int, digit: int) -> dict:
        """Write ``digit`` (0 clears) at 1-based ``row``, ``col``; ``ValueError`` if not allowed."""
        n = self.size
        if not (1 <= row <= n and 1 <= col <= n):
            raise ValueError(f"row and col must be 1..{n}")
        if not 0 <= digit <= n:
            raise ValueError(f"digit must be 1..{n}, or 0 to clear")
        i = (row - 1) * n + col - 1
        if self.puzzle[i] != BLANK:
            raise ValueError(f"row {row} column {col} is a clue ({self.puzzle[i]}); it stays")
        self.cells[i] = str(digit) if digit else BLANK
        self.placed += 1
        return {"row": row, "col": col, "digit": digit, "blanks_left": self.cells.count(BLANK)}


def render(grid: str, size: int) -> str:
    """One line per row, no separators: the form the answer must take."""
    return "\n".join(grid[r * size : (r + 1) * size] for r in range(size))


def read_grid(text: str, size: int) -> str | None:
    """The grid a reply holds, or None: exactly ``size`` lines of ``size`` cells, nothing else.

    Cells are ``1``..``size`` or ``.``/``0`` for a blank; spaces and ``|`` between cells and
    lines made only of ``-+|=`` are allowed (common ways to draw a grid). Any other text, a
    line too many or a cell too few makes the reply not a grid.
    """
    allowed = set("123456789"[:size])
    rows = []
    for line in text.strip().splitlines():
        cells = line.replace(" ", "").replace("|", "").replace("\t", "")
        if not cells or set(cells) <= set("-+="):
            continue
        if len(cells) != size or not set(cells) <= allowed | {".", "0"}:
            return None
        rows.append(cells.replace("0", BLANK))
    return "".join(rows) if len(rows) == size else None


def score(truth: dict, answer: str | None) -> Score:
    """Score an answer grid (None: the reply held no grid) against the task's truth."""
    size, puzzle, solution = truth["size"], truth["puzzle"], truth["solution"]
    comps = {"grid": 0.0, "clues": 0.0, "valid": 0.0, "cells": 0.0}
    if answer is None:
        return Score(0.0, False, FailureKind.INVALID_JSON, comps, f"no {size}x{size} grid")
    comps["grid"] = 1.0
    changed = [i for i, ch in enumerate(puzzle) if ch != BLANK and answer[i] != ch]
    if changed:
        r, c = divmod(changed[0], size)
        detail = f"changes {len(changed)} clue(s), first at row {r + 1} column {c + 1}"
        return Score(0.0, False, FailureKind.BAD_ARGUMENTS, comps, detail)
    comps["clues"] = 1.0
    for unit in units(size):
        digits = [answer[i] for i in unit if answer[i] != BLANK]
        if len(digits) != len(set(digits)):
            return Score(0.0, False, FailureKind.BAD_ARGUMENTS, comps, "a digit repeats in a unit")
    comps["valid"] = 1.0
    blanks = [i for i, ch in enumerate(puzzle) if ch == BLANK]
    right = sum(answer[i] == solution[i] for i in blanks)
    comps["cells"] = right / len(blanks)
    if right < len(blanks):
        detail = f"{right} of {len(blanks)} blank cells right"
        return Score(comps["cells"], False, FailureKind.BAD_ARGUMENTS, comps, detail)
    return Score(1.0, True, None, comps, "")
