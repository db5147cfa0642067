"""Nim against the environment: the policy moves, the opponent replies at once, last stone wins.

A move takes one or more stones from one heap (heaps numbered from 1). The policy always moves
first from a position whose nim-sum (XOR of the heaps) is not zero, so perfect play wins
against any opponent: move to nim-sum zero every time (Bouton, 1901).

The opponent is a pure function of (task seed, ply, heaps), so the server's session and the
verifier's replay see the same replies: ``optimal`` moves to nim-sum zero whenever it can
(a seeded choice among such moves) and otherwise takes a seeded random legal move;
``seeded`` always takes a seeded random legal move.

Score (pure): the verifier replays the policy's executed ``move`` calls itself (tool outputs
are not trusted) through the same :class:`NimGame`; reward 1.0 iff the policy took the last
stone, else 0 — no partial credit, a game is won or not.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import reduce
from operator import xor

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score

OPPONENTS = ("optimal", "seeded")


def nim_sum(heaps: list[int]) -> int:
    return reduce(xor, heaps, 0)


def winning_moves(heaps: list[int]) -> list[tuple[int, int]]:
    """``(heap index, take)`` moves that leave nim-sum zero (none when it already is zero)."""
    x = nim_sum(heaps)
    return [(i, h - (h ^ x)) for i, h in enumerate(heaps) if x and h ^ x < h]


def opponent_move(heaps: list[int], kind: str, seed: int, ply: int) -> tuple[int, int]:
    """The opponent's reply; depends on nothing but its arguments."""
    rng = random.Random(f"{seed}/{ply}/{heaps}")
    good = winning_moves(heaps) if kind == "optimal" else []
    legal = [(i, take) for i, h in enumerate(heaps) for take in range(1, h + 1)]
    return rng.choice(good or legal)


@dataclass
class NimGame:
    """One game's state; :meth:`move` plays the policy's move and the opponent's reply."""

    heaps: list[int]
    opponent: str
    seed: int
    ply: int = 0
    winner: str | None = None
    history: list[dict] = field(default_factory=list)

    @classmethod
    def from_truth(cls, truth: dict) -> NimGame:
        return cls(list(truth["heaps"]), truth["opponent"], truth["opponent_seed"])

    def move(self, heap: int, take: int) -> dict:
        """Apply a legal move (``ValueError`` otherwise, state unchanged), then the reply."""
        if self.winner is not None:
            raise ValueError(f"the game is over: {self._winner_text()}")
        if not 1 <= heap <= len(self.heaps):
            raise ValueError(f"heap must be 1..{len(self.heaps)}, not {heap}")
        if not 1 <= take <= self.heaps[heap - 1]:
            raise ValueError(f"heap {heap} has {self.heaps[heap - 1]} stones; take 1 to all")
        reply = None
        self._take(heap - 1, take, "you")
        if self.winner is None:
            i, n = opponent_move(self.heaps, self.opponent, self.seed, self.ply)
            self._take(i, n, "opponent")
            reply = {"heap": i + 1, "take": n}
        return {"heaps": list(self.heaps), "opponent_took": reply, "winner": self.winner}

    def _take(self, index: int, take: int, player: str) -> None:
        self.heaps[index] -= take
        self.ply += 1
        self.history.append({"player": player, "heap": index + 1, "take": take})
        if not any(self.heaps):
            self.winner = player

    def _winner_text(self) -> str:
        return "you took the last stone" if self.winner == "you" else "the opponent won"


def gold_moves(truth: dict) -> list[tuple[int, int]]:
    """The policy's moves of a perfect game (1-based heaps), replies simulated as they come."""
    game, moves = NimGame.from_truth(truth), []
    if not nim_sum(game.heaps):
        raise ValueError(f"heaps {game.heaps} have nim-sum 0: the first player cannot force a win")
    while game.winner is None:
        i, take = winning_moves(game.heaps)[0]
        moves.append((i + 1, take))
        game.move(i + 1, take)
    return moves


def score(truth: dict, moves: list[tuple[object, object]]) -> Score:
    """Replay the policy's moves; illegal ones change nothing (as on the server)."""
    game, illegal = NimGame.from_truth(truth), 0
    for heap, take in moves:
        try:
            if type(heap) is not int or type(take) is not int:
                raise ValueError("heap and take must be integers")
            game.move(heap, take)
        except ValueError:
            illegal += 1
    comps = {"won": float(game.winner == "you"), "legal_moves": 1.0 - illegal / max(len(moves), 1)}
    if game.winner == "you":
        return Score(1.0, True, None, comps, "")
    detail = (
        "the opponent took the last stone"
        if game.winner == "opponent"
        else f"the game is not over: heaps {game.heaps}"
    )
    if illegal:
        detail += f"; {illegal} illegal move(s) refused"
    kind = FailureKind.BAD_ARGUMENTS if moves else FailureKind.NO_TOOL_CALL
    return Score(0.0, False, kind, comps, detail)
