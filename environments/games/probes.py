"""Adversarial answers per game: each must score at most its ceiling (all below 1.0).

``gymflow env check games`` plays every probe through the server as the policy's reply at
every turn; ``tests/test_games_probes.py`` checks each is caught for the reason it names.
"""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Probe
from gymflow.environments.games import nim, sudoku
from gymflow.environments.games.tools import placement_calls


def sudoku_probes(truth: dict) -> list[Probe]:
    """Wrong grids, grids in prose, text claims and tool misuse; two earn a sliver of credit."""
    size, puzzle, solution = truth["size"], truth["puzzle"], truth["solution"]
    blanks = [i for i, ch in enumerate(puzzle) if ch == sudoku.BLANK]
    first_clue = next(i for i, ch in enumerate(puzzle) if ch != sudoku.BLANK)
    a = puzzle[first_clue]
    b = next(d for d in "123456789"[:size] if d != a)
    relabelled = solution.translate(str.maketrans({a: b, b: a}))
    row_start = blanks[0] // size * size
    repeated = list(solution)
    repeated[blanks[0]] = next(
        solution[j] for j in range(row_start, row_start + size) if j != blanks[0]
    )
    one_blank = list(solution)
    one_blank[blanks[0]] = sudoku.BLANK
    r, c = divmod(first_clue, size)
    first_blank_digit = int(solution[blanks[0]])
    br, bc = divmod(blanks[0], size)
    grid = sudoku.render(solution, size)
    return [
        Probe("puzzle_unchanged", sudoku.render(puzzle, size), 0.0),
        Probe("clues_relabelled", sudoku.render(relabelled, size), 0.0),
        Probe("repeated_digit", sudoku.render("".join(repeated), size), 0.0),
        Probe(
            "one_blank_left",
            sudoku.render("".join(one_blank), size),
            (len(blanks) - 1) / len(blanks),
        ),
        Probe("prose_around_grid", f"Here is the solved grid:\n{grid}", 0.0),
        Probe("grid_plus_a_row", f"{grid}\n{grid.splitlines()[0]}", 0.0),
        Probe("claims_solved", "Solved! Every row, column and box is complete.", 0.0),
        Probe(
            "place_on_clue",
            render_call("place", {"row": r + 1, "col": c + 1, "digit": int(b)}),
            0.0,
        ),
        Probe(
            "place_with_strings",
            render_call(
                "place", {"row": str(br + 1), "col": str(bc + 1), "digit": str(first_blank_digit)}
            ),
            0.0,
        ),
        Probe("one_cell_by_tool", placement_calls(truth, solution, only=1)[0], 1 / len(blanks)),
    ]


def nim_probes(truth: dict) -> list[Probe]:
    """Victory claimed in text, illegal or mistyped moves, a move for the opponent."""
    heaps = truth["heaps"]
    (i, take), *_ = nim.winning_moves(heaps)
    probes = [
        Probe("claims_victory", "I took the last stone. I win!", 0.0),
        Probe("take_too_many", render_call("move", {"heap": 1, "take": heaps[0] + 1}), 0.0),
        Probe("take_nothing", render_call("move", {"heap": 1, "take": 0}), 0.0),
        Probe("no_such_heap", render_call("move", {"heap": len(heaps) + 1, "take": 1}), 0.0),
        Probe(
            "move_with_strings", render_call("move", {"heap": str(i + 1), "take": str(take)}), 0.0
        ),
        Probe(
            "move_for_the_opponent",
            render_call("move", {"heap": i + 1, "take": take, "player": "opponent"}),
            0.0,
        ),
        Probe("wrong_game_tool", render_call("place", {"row": 1, "col": 1, "digit": 1}), 0.0),
    ]
    losing = [
        (h + 1, t)
        for h, size in enumerate(heaps)
        for t in range(1, size + 1)
        if (h, t) not in nim.winning_moves(heaps)
    ]
    if truth["opponent"] == "optimal" and losing:
        # Against perfect play one move off nim-sum zero loses the game, whatever follows.
        h, t = losing[0]
        probes.append(Probe("bad_first_move", render_call("move", {"heap": h, "take": t}), 0.0))
    return probes
