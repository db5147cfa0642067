"""code: write a Python function that passes hidden unit tests, run in a sandbox."""

from gymflow.environments.code.environment import CodeEnvironment

__all__ = ["CodeEnvironment"]
