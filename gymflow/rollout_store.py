"""Rollout rows with full lineage, written as one validated Parquet file per iteration.

A rollout id is deterministic from (run, iteration, task, sample), so re-running an iteration
rewrites the same ids instead of adding duplicates.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from gymflow.agent_loop import Episode
from gymflow.schemas import ROLLOUTS, write_table


def rollout_id(run_id: str, iteration: int, group_id: str, sample_idx: int) -> str:
    blob = f"{run_id}/{iteration}/{group_id}/{sample_idx}"
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def episode_rows(
    episodes: list[Episode],
    used: list[bool],
    run_id: str,
    iteration: int,
    policy_version: int,
    env_version: str,
    dataset_hash: str,
    group_size: int,
) -> list[dict]:
    rows = []
    for i, (ep, was_used) in enumerate(zip(episodes, used, strict=True)):
        group_idx, sample_idx = divmod(i, group_size)
        group_id = f"{iteration}-{group_idx}-{ep.task.task_id}"
        rows.append(
            {
                "rollout_id": rollout_id(run_id, iteration, group_id, sample_idx),
                "run_id": run_id,
                "iteration": iteration,
                "policy_version": policy_version,
                "env": ep.task.env,
                "env_version": env_version,
                "task_id": ep.task.task_id,
                "group_id": group_id,
                "sample_idx": sample_idx,
                "dataset_hash": dataset_hash,
                "trajectory": json.dumps(ep.items, ensure_ascii=False),
                "prompt_ids": ep.prompt_ids,
                "completion_ids": ep.completion_ids,
                "logprobs": ep.logprobs,
                "env_mask": ep.env_mask,
                "reward": float(ep.score["reward"]),
                "reward_components": json.dumps(ep.score.get("components", {})),
                "success": bool(ep.score["success"]),
                "failure_kind": ep.score.get("failure_kind"),
                "used_for_training": was_used,
                "turns": ep.turns,
                "tool_calls": ep.tool_calls,
                "tokens": len(ep.prompt_ids) + len(ep.completion_ids),
                "latency_s": float(ep.latency_s),
                "seed": ep.seed,
                "started_at": float(ep.started_at),
            }
        )
    return rows


def write_rollouts(rows: list[dict], path: Path) -> Path:
    schema = {
        "prompt_ids": pl.List(pl.Int64),
        "completion_ids": pl.List(pl.Int64),
        "logprobs": pl.List(pl.Float64),
        "env_mask": pl.List(pl.Int64),
        "failure_kind": pl.String,
    }
    df = pl.DataFrame(rows, schema_overrides=schema)
    return write_table(df, ROLLOUTS, path)
