"""The games' tools. Each works on its own game's session state and refuses the other game."""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.environments.games.nim import NimGame
from gymflow.environments.games.sudoku import BLANK, SudokuBoard, render

Game = SudokuBoard | NimGame


def place(session: Game, row: int, col: int, digit: int) -> dict:
    """Write a digit into a blank cell of the sudoku (clues cannot be changed).

    Args:
        row: Row number, 1 at the top.
        col: Column number, 1 at the left.
        digit: The digit to write, or 0 to clear the cell.
    """
    return _of(session, SudokuBoard).place(row, col, digit)


def show_grid(session: Game) -> dict:
    """Show the sudoku grid as it is now (one line per row, '.' for a blank)."""
    board = _of(session, SudokuBoard)
    return {"grid": render(board.grid, board.size)}


def move(session: Game, heap: int, take: int) -> dict:
    """Take stones from one Nim heap; the opponent replies at once.

    Args:
        heap: Heap number, from 1.
        take: How many stones to take from it (1 or more).
    """
    return _of(session, NimGame).move(heap, take)


TOOLS = [place, show_grid, move]


def placement_calls(truth: dict, grid: str, only: int | None = None) -> list[str]:
    """``place`` calls writing ``grid``'s digits into the puzzle's blanks (the first ``only``)."""
    size, calls = truth["size"], []
    for i, ch in enumerate(truth["puzzle"]):
        if ch == BLANK:
            r, c = divmod(i, size)
            calls.append(render_call("place", {"row": r + 1, "col": c + 1, "digit": int(grid[i])}))
    return calls[:only]


def _of(session: Game, kind: type) -> Game:
    if not isinstance(session, kind):
        game = "sudoku" if isinstance(session, SudokuBoard) else "Nim game"
        raise ValueError(f"this task is a {game}; that tool is for the other game")
    return session
