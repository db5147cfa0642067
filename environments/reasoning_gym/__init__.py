"""reasoning_gym: any reasoning-gym task family as an environment, behind a scorer self-check."""

from gymflow.environments.reasoning_gym.server import ReasoningGymServer

__all__ = ["ReasoningGymServer"]
