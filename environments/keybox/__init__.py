"""keybox: find the key by opening boxes — an environment whose demonstrations cannot carry the skill."""

from gymflow.environments.keybox.environment import KeyboxEnvironment

__all__ = ["KeyboxEnvironment"]
