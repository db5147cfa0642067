"""Gymflow episodes written as NeMo Gym rollout rows (its /verify response shape), so NeMo Gym tooling reads our rollouts."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.data.nemo_gym import (
    CREATE_PARAM_KEYS,
    GYMFLOW_FIELDS,
    RESPONSE_KEYS,
    output_item,
    responses_tool,
)
from gymflow.env.environment import Environment
from gymflow.rollout.episode import Episode


def rollout_row(episode: Episode, env: Environment, model: str = "gymflow-policy") -> dict:
    """One verified gymflow episode as a NeMo Gym rollout row.

    Top level: ``responses_create_params``, ``response``, ``reward``, then the task's verifier
    fields (its ground truth, as NeMo Gym echoes a task row's fields) and gymflow's own
    ``task_id``, ``env``, ``success``, ``failure_kind``, ``reward_components``. Values the
    episode does not know (sampling settings, billing) are null. ``usage`` counts the prompt
    once and the model's own tokens as output (tool-output tokens are in neither).
    """
    task = episode.task
    tools = [responses_tool(t) for t in task.tools]
    params = {key: None for key in CREATE_PARAM_KEYS}
    params.update(
        input=[
            {"content": m["content"], "role": m["role"], "type": "message"} for m in task.prompt
        ],
        tools=tools,
        parallel_tool_calls=True,  # gymflow runs every call of a turn
        tool_choice="auto",
    )
    truncated = episode.truncated
    output_tokens = sum(episode.env_mask)
    response = {key: None for key in RESPONSE_KEYS}
    response.update(
        id=f"resp_{episode.session_id}",
        created_at=episode.started_at,
        metadata={},
        model=model,
        object="response",
        output=[output_item(it, i) for i, it in enumerate(episode.items[len(task.prompt) :])],
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=tools,
        background=False,
        reasoning={"effort": None, "generate_summary": None, "summary": None},
        status="incomplete" if truncated else "completed",
        incomplete_details={"reason": "max_output_tokens"} if truncated else None,
        text={"format": {"type": "text"}, "verbosity": None},
        truncation="disabled",
        usage={
            "input_tokens": len(episode.prompt_ids),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": len(episode.prompt_ids) + output_tokens,
        },
    )
    row = {"responses_create_params": params, "response": response, "reward": episode.reward}
    clashes = sorted(set(task.ground_truth) & (set(row) | set(GYMFLOW_FIELDS)))
    if clashes:
        raise ValueError(f"ground-truth fields clash with rollout fields: {', '.join(clashes)}")
    row.update(task.ground_truth)
    score = episode.score
    row.update(
        task_id=task.task_id,
        env=env.name,
        success=bool(score["success"]),
        failure_kind=score["failure_kind"],
        reward_components=dict(score["components"]),
    )
    return row


def write_rollouts_jsonl(
    path: Path | str, episodes: Iterable[Episode], env: Environment, model: str = "gymflow-policy"
) -> int:
    """Write the episodes as NeMo Gym rollout JSONL, atomically (complete or absent); the count."""
    rows = [rollout_row(ep, env, model) for ep in episodes]
    write_jsonl_atomic(Path(path), rows)
    return len(rows)
