"""Nim: the strategy is perfect, the opponent is a pure function, illegal moves change nothing."""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from gymflow.environments.games.nim import (
    NimGame,
    gold_moves,
    nim_sum,
    opponent_move,
    score,
    winning_moves,
)


@cache
def first_player_wins(heaps: tuple[int, ...]) -> bool:
    """Game-tree search, independent of the nim-sum rule under test."""
    return any(
        not first_player_wins(tuple(sorted(heaps[:i] + (h - t,) + heaps[i + 1 :])))
        for i, h in enumerate(heaps)
        for t in range(1, h + 1)
    )


def test_nim_sum_moves_are_exactly_the_moves_to_a_lost_position():
    for heaps in itertools.product(range(6), repeat=3):
        assert first_player_wins(tuple(sorted(heaps))) == (nim_sum(list(heaps)) != 0)
        good = {
            (i, t)
            for i, h in enumerate(heaps)
            for t in range(1, h + 1)
            if not first_player_wins(tuple(sorted(heaps[:i] + (h - t,) + heaps[i + 1 :])))
        }
        assert set(winning_moves(list(heaps))) == good


def truth(heaps, opponent="optimal", seed=3):
    return {"game": "nim", "heaps": heaps, "opponent": opponent, "opponent_seed": seed}


@pytest.mark.parametrize("opponent", ["optimal", "seeded"])
def test_the_gold_game_wins_against_both_opponents(opponent):
    for heaps in ([1, 2], [3, 4, 5], [7, 1, 5], [2, 2, 3, 5]):
        for seed in range(5):
            t = truth(heaps, opponent, seed)
            assert score(t, gold_moves(t)).reward == 1.0


def test_the_opponent_depends_only_on_its_arguments_and_plays_perfectly_when_it_can():
    a = [opponent_move([3, 5, 6], "seeded", 9, ply) for ply in range(20)]
    assert a == [opponent_move([3, 5, 6], "seeded", 9, ply) for ply in range(20)]
    assert len(set(a)) > 1  # seeded, not constant
    i, take = opponent_move([3, 5, 7], "optimal", 9, 1)
    heaps = [3, 5, 7]
    heaps[i] -= take
    assert nim_sum(heaps) == 0


def test_illegal_moves_are_refused_and_change_nothing():
    game = NimGame.from_truth(truth([3, 4]))
    for heap, take, message in [(0, 1, "heap must be"), (3, 1, "heap must be"), (1, 4, "has 3")]:
        with pytest.raises(ValueError, match=message):
            game.move(heap, take)
    with pytest.raises(ValueError, match="has 3"):
        game.move(1, 0)
    assert game.heaps == [3, 4] and game.ply == 0


def test_a_move_after_the_game_is_over_is_refused():
    game = NimGame.from_truth(truth([1]))
    assert game.move(1, 1) == {"heaps": [0], "opponent_took": None, "winner": "you"}
    with pytest.raises(ValueError, match="the game is over"):
        game.move(1, 1)


def test_losing_stalling_and_mistyped_moves_score_zero():
    t = truth([3, 4])
    lost = score(t, [(1, 1), (2, 1), (1, 1), (1, 1), (2, 1), (2, 1)])
    assert lost.reward == 0.0 and "the opponent took the last stone" in lost.detail
    stalled = score(t, gold_moves(t)[:1])
    assert stalled.reward == 0.0 and stalled.detail.startswith("the game is not over")
    typed = score(t, [("1", "1")] + [(h, k) for h, k in gold_moves(t)])
    assert typed.reward == 1.0 and typed.components["legal_moves"] < 1.0  # refused, then won
    with pytest.raises(ValueError, match="nim-sum 0"):
        gold_moves(truth([7, 1, 6]))
    nothing = score(t, [])
    assert (nothing.reward, nothing.failure_kind) == (0.0, "no_tool_call")
