"""reasoning_gym: any reasoning-gym task family as an environment, behind a scorer self-check."""

from gymflow.environments.reasoning_gym.environment import ReasoningGymEnvironment

__all__ = ["ReasoningGymEnvironment"]
