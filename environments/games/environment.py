"""The games environment: sudoku (one reply or the ``place`` tool) and Nim (the ``move`` tool).

Tasks alternate 4×4 sudoku, 9×9 sudoku and Nim (see :func:`GamesEnvironment.generate`). The
session holds the game (a :class:`~gymflow.environments.games.sudoku.SudokuBoard` or a
:class:`~gymflow.environments.games.nim.NimGame`); the verifier never reads the session or the tool
outputs: it replays the episode's executed calls through the same game code, so a transcript
that claims a win or forges an observation gains nothing.
"""

from __future__ import annotations

import contextlib
import json
import random

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import final_assistant_message
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.env.tool_schema import tool_spec
from gymflow.environments.games import nim, sudoku
from gymflow.environments.games.probes import nim_probes, sudoku_probes
from gymflow.environments.games.tools import TOOLS, placement_calls

SPECS = {fn.__name__: tool_spec(fn) for fn in TOOLS}
SUDOKU_CLUES = {4: (4, 8), 9: (28, 40)}
"""Clue counts drawn per size (the difficulty): fewer clues, harder puzzle."""
NIM_MAX_STONES = 15
"""Keeps a game within ``max_turns``: at most 8 policy moves plus the closing line."""


class GamesEnvironment(Environment):
    name = "games"
    version = "1"
    max_turns = 12

    def tools(self):
        return list(TOOLS)

    def new_state(self, task: Task) -> sudoku.SudokuBoard | nim.NimGame:
        truth = task.ground_truth
        if truth["game"] == "sudoku":
            return sudoku.SudokuBoard.from_truth(truth)
        return nim.NimGame.from_truth(truth)

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        rng = random.Random(seed)
        drafts = []
        for i in range(n):
            if i % 3 == 2:
                truth = _nim_truth(rng)
                prompt = _nim_prompt(truth)
            else:
                size = 4 if i % 3 == 0 else 9
                puzzle = sudoku.make_puzzle(size, rng.randint(*SUDOKU_CLUES[size]), rng)
                truth = {
                    "game": "sudoku",
                    "size": size,
                    "puzzle": puzzle.puzzle,
                    "solution": puzzle.solution,
                    "clues": puzzle.clues,
                    "mode": rng.choice(["answer", "tools"]),
                }
                prompt = _sudoku_prompt(truth)
            drafts.append(TaskDraft([{"role": "user", "content": prompt}], truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        truth, calls = task.ground_truth, executed_calls(items)
        if truth["game"] == "nim":
            moves = [
                (args["heap"], args["take"]) if args else (None, None)
                for name, args in calls
                if name == "move"
            ]
            return nim.score(truth, moves)
        board = sudoku.SudokuBoard.from_truth(truth)
        for name, args in calls:
            if name == "place" and args:
                with contextlib.suppress(ValueError):  # refused on the server too
                    board.place(**args)
        answer = _final_grid(items, truth["size"])
        if answer is None and board.placed:
            answer = board.grid
        return sudoku.score(truth, answer)

    def gold_text(self, task: Task) -> str:
        truth = task.ground_truth
        if truth["game"] == "sudoku":
            return sudoku.render(truth["solution"], truth["size"])
        return "I took the last stone: I won."

    def gold_turns(self, task: Task) -> list[str]:
        """Sudoku: the grid, or every blank placed in one turn then "done"; Nim: a perfect game."""
        truth = task.ground_truth
        if truth["game"] == "nim":
            moves = [render_call("move", {"heap": h, "take": t}) for h, t in nim.gold_moves(truth)]
            return [*moves, self.gold_text(task)]
        if truth["mode"] == "answer":
            return [self.gold_text(task)]
        return ["\n".join(placement_calls(truth, truth["solution"])), "done"]

    def probes(self, task: Task) -> list[Probe]:
        truth = task.ground_truth
        return nim_probes(truth) if truth["game"] == "nim" else sudoku_probes(truth)


def executed_calls(items: list[dict]) -> list[tuple[str, dict | None]]:
    """``(name, arguments)`` of each call that has an output, in order; arguments are None when
    the server would refuse them (not JSON, wrong types, unknown names). Each call id counts once.
    """
    answered = {it.get("call_id") for it in items if it.get("type") == "function_call_output"}
    calls, seen = [], set()
    for it in items:
        call_id = it.get("call_id")
        if it.get("type") != "function_call" or call_id not in answered or call_id in seen:
            continue
        seen.add(call_id)
        name, args = it.get("name"), None
        try:
            args = SPECS[name].validate(json.loads(it["arguments"]))
        except (KeyError, TypeError, ValueError, RecursionError):
            args = None  # JSONDecodeError is a ValueError
        calls.append((name, args))
    return calls


def _final_grid(items: list[dict], size: int) -> str | None:
    """The grid in the final assistant message, if that message is exactly a grid."""
    message = final_assistant_message(items)
    if message is None or message.get("parse_error"):
        return None
    return sudoku.read_grid(str(message.get("content") or ""), size)


def _sudoku_prompt(truth: dict) -> str:
    size, side = truth["size"], sudoku.box_side(truth["size"])
    how = (
        f"Reply with the completed grid only: {size} lines of {size} digits."
        if truth["mode"] == "answer"
        else "Fill the blanks with the place tool (row and column from 1), then reply done."
    )
    return (
        f"Solve this {size}x{size} sudoku: fill the blanks (.) so that every row, column and "
        f"{side}x{side} box holds the digits 1-{size} once each.\n\n"
        f"{sudoku.render(truth['puzzle'], size)}\n\n{how}"
    )


def _nim_truth(rng: random.Random) -> dict:
    while True:
        heaps = [rng.randint(1, 7) for _ in range(rng.randint(2, 4))]
        if sum(heaps) <= NIM_MAX_STONES and nim.nim_sum(heaps):
            break
    opponent = rng.choice(nim.OPPONENTS)
    return {
        "game": "nim",
        "heaps": heaps,
        "opponent": opponent,
        "opponent_seed": rng.randrange(1 << 31),
    }


def _nim_prompt(truth: dict) -> str:
    style = "plays perfectly" if truth["opponent"] == "optimal" else "plays at random"
    return (
        f"Let's play Nim. Heaps: {truth['heaps']}. You move first. A move takes 1 or more "
        "stones from one heap: call move(heap, take), heaps numbered from 1. Your opponent "
        f"({style}) replies right after each of your moves. Whoever takes the last stone "
        "wins. When the game is over, say who won in one line."
    )
