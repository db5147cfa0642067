"""One episode's state as the driver builds it, and the sampling settings of its model turns."""

from __future__ import annotations

from dataclasses import dataclass, field

from gymflow.core.task_record import Task

DEFAULT_MAX_NEW_TOKENS = 48
"""Tokens per model turn unless a config says otherwise (the one place this default lives)."""


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    """Tokens per model turn."""
    max_completion_tokens: int = 256
    """Budget for the whole episode's completion (model + tool tokens)."""
    temperature: float = 1.0
    greedy: bool = False


@dataclass
class Episode:
    task: Task
    seed: int
    session_id: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    """The chat conversation (message backends only)."""
    has_token_view: bool = True
    policy_failed: bool = False
    """The backend could not produce a turn; ``score`` holds its failure kind, not a verdict."""
    turns: int = 0
    tool_calls: int = 0
    done: bool = False
    truncated: bool = False
    closed: bool = False
    """The server already ended the session (``/verify`` with ``close``)."""
    score: dict = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    """Token counts the server reported, summed over turns (message backends that send usage)."""
    started_at: float = 0.0
    latency_s: float = 0.0

    @property
    def reward(self) -> float:
        return float(self.score["reward"])
