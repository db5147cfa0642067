"""The ``POST /run`` contract of an agent server: what is asked, what comes back.

A request names a task (the whole record, or an id the server was started with), a policy (a
spec as :func:`gymflow.policy.spec.parse_spec` reads it, or an OpenAI-compatible base URL),
an environment (a name from the registry, run in the agent server's process, or a resources
server's URL), the rollout's seed and the sampling settings. The answer is the episode as
:func:`gymflow.rollout.driver.run_episode` left it: Responses-style items, the verifier's
score (reward, success, failure kind, components, detail), the token view training needs
(prompt ids, completion ids, sampling logprobs, env mask; absent when the backend gave no
ids), counts and timing. An episode an infrastructure fault stopped (the environment down, a
refused call) is still an answer, with ``error`` set and no score: the caller records it as a
rollout without a reward, as the in-process window does.

:func:`result_of` and :func:`episode_of` are inverses on everything a rollout row or an
evaluation row reads, so a row built from a ``/run`` answer equals the in-process one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS, Episode, Sampling


class RunRequest(BaseModel):
    """One episode to run (the body of ``POST /run``)."""

    model_config = ConfigDict(extra="forbid")

    task: Task | None = Field(None, description="The task record (or give task_id).")
    task_id: str | None = Field(None, description="A task of the server's --tasks file.")
    policy: str | None = Field(
        None,
        description="A policy spec (transformers:PATH, openai:URL?model=M, models:/NAME@ALIAS, "
        "scripted:ENV ...) or an OpenAI-compatible base URL; default: the server's --policy.",
    )
    model: str | None = Field(
        None, description="With a base URL as policy: the model name to ask for."
    )
    env: str | None = Field(
        None,
        description="An environment name (run in the agent server) or a resources server URL; "
        "default: the task's environment, in-process.",
    )
    seed: int = Field(0, description="The rollout's sampling seed (turn k samples with seed+k).")
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per turn.")
    max_completion_tokens: int = Field(256, ge=1, description="Tokens per episode.")
    temperature: float = Field(1.0, gt=0.0, le=5.0)
    greedy: bool = False

    @model_validator(mode="after")
    def _one_task(self) -> RunRequest:
        if (self.task is None) == (self.task_id is None):
            raise ValueError("give exactly one of task (the record) or task_id")
        return self

    def sampling(self) -> Sampling:
        return Sampling(
            max_new_tokens=self.max_new_tokens,
            max_completion_tokens=self.max_completion_tokens,
            temperature=self.temperature,
            greedy=self.greedy,
        )


def run_request(
    task: Task, seed: int, sampling: Sampling, policy: str | None, env: str | None
) -> dict:
    """The JSON body asking an agent server for one rollout."""
    body: dict[str, Any] = {
        "task": task.model_dump(),
        "seed": seed,
        "max_new_tokens": sampling.max_new_tokens,
        "max_completion_tokens": sampling.max_completion_tokens,
        "temperature": sampling.temperature,
        "greedy": sampling.greedy,
    }
    if policy is not None:
        body["policy"] = policy
    if env is not None:
        body["env"] = env
    return body


def result_of(ep: Episode) -> dict:
    """An episode as ``/run`` answers it (JSON-ready)."""
    view = None
    if ep.has_token_view:
        view = {
            "prompt_ids": ep.prompt_ids,
            "completion_ids": ep.completion_ids,
            "logprobs": ep.logprobs,
            "env_mask": ep.env_mask,
        }
    return {
        "task_id": ep.task.task_id,
        "seed": ep.seed,
        "items": ep.items,
        "score": ep.score,
        "reward": None if ep.policy_failed else ep.score.get("reward"),
        "success": bool(ep.score.get("success")) and not ep.policy_failed,
        "failure_kind": ep.score.get("failure_kind"),
        "policy_failed": ep.policy_failed,
        "token_view": view,
        "turns": ep.turns,
        "tool_calls": ep.tool_calls,
        "truncated": ep.truncated,
        "usage": ep.usage,
        "started_at": ep.started_at,
        "latency_s": ep.latency_s,
        "error": None,
    }


def error_result(task: Task, seed: int, error: GymflowError) -> dict:
    """``/run``'s answer for an episode an infrastructure fault stopped (no score)."""
    return {
        "task_id": task.task_id,
        "seed": seed,
        "reward": None,
        "success": False,
        "failure_kind": str(error.kind),
        "error": {"kind": str(error.kind), "message": error.detail},
    }


def episode_of(task: Task, seed: int, result: dict) -> tuple[Episode | None, GymflowError | None]:
    """The episode (or the error) a ``/run`` answer describes, for the one store's row builder."""
    error = result.get("error")
    if error:
        try:
            kind = FailureKind(error.get("kind"))
        except ValueError:
            kind = FailureKind.AGENT_UNAVAILABLE
        return None, GymflowError(kind, str(error.get("message", "")))
    if result.get("task_id") != task.task_id or result.get("seed") != seed:
        raise GymflowError(
            FailureKind.AGENT_UNAVAILABLE,
            f"agent server answered for task {result.get('task_id')!r} seed {result.get('seed')}"
            f", asked task {task.task_id!r} seed {seed}",
        )
    view = result.get("token_view")
    ep = Episode(
        task=task,
        seed=seed,
        items=list(result["items"]),
        score=dict(result["score"]),
        has_token_view=view is not None,
        policy_failed=bool(result["policy_failed"]),
        turns=int(result["turns"]),
        tool_calls=int(result["tool_calls"]),
        done=True,
        truncated=bool(result["truncated"]),
        closed=True,
        usage=dict(result.get("usage") or {}),
        started_at=float(result["started_at"]),
        latency_s=float(result["latency_s"]),
    )
    if view is not None:
        ep.prompt_ids = list(view["prompt_ids"])
        ep.completion_ids = list(view["completion_ids"])
        ep.logprobs = [float(x) for x in view["logprobs"]]
        ep.env_mask = list(view["env_mask"])
    return ep, None
