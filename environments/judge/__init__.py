"""judge: open-ended answers graded by an LLM judge (any OpenAI-compatible server) on a rubric."""

from gymflow.environments.judge.server import JudgeServer

__all__ = ["JudgeServer"]
