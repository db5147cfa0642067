"""code: write a Python function that passes hidden unit tests, run in a sandbox."""

from gymflow.environments.code.server import CodeServer

__all__ = ["CodeServer"]
