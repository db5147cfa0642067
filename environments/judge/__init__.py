"""judge: open-ended answers graded by an LLM judge (any OpenAI-compatible server) on a rubric."""

from gymflow.environments.judge.environment import JudgeEnvironment

__all__ = ["JudgeEnvironment"]
