"""math: one question, one reply; the final answer (``\\boxed{}``) checked with math-verify."""

from gymflow.environments.math.environment import MathEnvironment

__all__ = ["MathEnvironment"]
