"""games: sudoku (4×4 and 9×9, unique solutions) and Nim against the environment's opponent."""

from gymflow.environments.games.environment import GamesEnvironment

__all__ = ["GamesEnvironment"]
