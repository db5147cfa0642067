"""math: one question, one reply; the final answer (``\\boxed{}``) checked with math-verify."""

from gymflow.environments.math.server import MathServer

__all__ = ["MathServer"]
