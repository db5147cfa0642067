"""judge: open-ended answers graded by an LLM judge (any OpenAI-compatible server) on a rubric."""

from environments.judge.server import JudgeServer

__all__ = ["JudgeServer"]
