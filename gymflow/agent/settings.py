"""Settings of a run's agents: external agent programs GRPO trains through, agent servers that
run evaluations. Each field documented once, here."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ExternalAgentSettings(BaseModel):
    """GRPO's rollouts made by external agent programs through the capturing proxy
    (:mod:`gymflow.agent.external`) instead of the in-process episode driver."""

    model_config = ConfigDict(extra="forbid")

    programs: list[str] = Field(
        min_length=1,
        description="Agent entry points, FILE.py:FUNCTION (relative to the working folder or the "
        "repository) or MODULE:FUNCTION, called once per rollout with prompt, tools, base_url, "
        "api_key and tool_url; rollouts go to them in turn.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Extra keyword arguments given to every program."
    )
    concurrency: int = Field(16, ge=1, description="Agent episodes running at once.")
    episode_timeout_s: float = Field(
        300.0, gt=0, description="A program still running after this is abandoned."
    )

    @field_validator("programs")
    @classmethod
    def _entry_points(cls, value: list[str]) -> list[str]:
        for ref in value:
            where, sep, name = ref.rpartition(":")
            if not sep or not where or not name.isidentifier():
                raise ValueError(f"{ref!r}: write FILE.py:FUNCTION or MODULE:FUNCTION")
        return value
