"""Rollout rows with full lineage: one validated Parquet file per GRPO iteration, or part files
appended by the rollout engine (:mod:`gymflow.rollout.engine`).

A rollout id is deterministic from (run, iteration, task, sample), so re-running an iteration
rewrites the same ids instead of adding duplicates, and a resumed collection knows which
rollouts are already on disk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandera.polars as pa
import polars as pl

from gymflow.core.failures import GymflowError
from gymflow.core.task_record import Task
from gymflow.core.trajectory import prompt_items
from gymflow.data.schemas import ROLLOUT_ATTEMPTS, ROLLOUTS, read_table, validate, write_table
from gymflow.rollout.episode import Episode


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


# --- the rollout engine's store: part files under one folder ----------------------------------

PART_GLOB = "part-*.parquet"


@dataclass(frozen=True)
class Lineage:
    """What every row of one collection shares: who produced it, from what, for which run."""

    run_id: str
    iteration: int
    policy_version: int
    policy: str
    """The policy spec string (``transformers:PATH``, ``openai:URL?model=M`` ...)."""
    env: str
    env_version: str
    dataset_hash: str


def group_id_of(iteration: int, task_id: str) -> str:
    """A group is the G samples of one task in one iteration (order-free, unlike GRPO's)."""
    return f"{iteration}-{task_id}"


def collected_row(
    lineage: Lineage,
    task: Task,
    sample_idx: int,
    seed: int,
    episode: Episode | None,
    error: GymflowError | None = None,
    attempt: int = 0,
) -> dict:
    """One row; ``episode`` None (with ``error``) for a rollout that never finished.

    A rollout without a verdict (the env or the policy failed) gets reward null, success
    False and the failure's kind and message: it is kept, never counted as a reward of 0.
    """
    group_id = group_id_of(lineage.iteration, task.task_id)
    row = {
        "rollout_id": rollout_id(lineage.run_id, lineage.iteration, group_id, sample_idx),
        "run_id": lineage.run_id,
        "iteration": lineage.iteration,
        "policy_version": lineage.policy_version,
        "env": lineage.env,
        "env_version": lineage.env_version,
        "task_id": task.task_id,
        "group_id": group_id,
        "sample_idx": sample_idx,
        "dataset_hash": lineage.dataset_hash,
        "policy": lineage.policy,
        "seed": seed,
        "attempt": attempt,
    }
    if episode is None:
        assert error is not None
        return {
            **row,
            "trajectory": json.dumps(prompt_items(task.prompt), ensure_ascii=False),
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "reward": None,
            "reward_components": "{}",
            "success": False,
            "failure_kind": str(error.kind),
            "failure_detail": error.detail,
            "used_for_training": False,
            "turns": 0,
            "tool_calls": 0,
            "tokens": 0,
            "latency_s": 0.0,
            "started_at": 0.0,
        }
    score = episode.score
    return {
        **row,
        "trajectory": json.dumps(episode.items, ensure_ascii=False),
        "prompt_ids": episode.prompt_ids,
        "completion_ids": episode.completion_ids,
        "logprobs": episode.logprobs,
        "env_mask": episode.env_mask,
        # a policy failure's score is a placeholder, not a verdict
        "reward": None if episode.policy_failed else float(score["reward"]),
        "reward_components": json.dumps(score.get("components", {})),
        "success": bool(score["success"]) and not episode.policy_failed,
        "failure_kind": score.get("failure_kind"),
        "failure_detail": score.get("detail") if score.get("failure_kind") else None,
        "used_for_training": False,
        "turns": episode.turns,
        "tool_calls": episode.tool_calls,
        "tokens": len(episode.prompt_ids) + len(episode.completion_ids),
        "latency_s": float(episode.latency_s),
        "started_at": float(episode.started_at),
    }


def rollouts_frame(rows: list[dict]) -> pl.DataFrame:
    """Rows as a frame with the ``ROLLOUTS`` dtypes (lists and nulls typed, not inferred)."""
    schema = {
        "prompt_ids": pl.List(pl.Int64),
        "completion_ids": pl.List(pl.Int64),
        "logprobs": pl.List(pl.Float64),
        "env_mask": pl.List(pl.Int64),
        "reward": pl.Float64,
        "failure_kind": pl.String,
        "failure_detail": pl.String,
        "policy": pl.String,
        "attempt": pl.Int64,
    }
    return pl.DataFrame(rows, schema_overrides=schema)


def write_part(rows: list[dict], folder: Path, schema: pa.DataFrameSchema, iteration: int) -> Path:
    """Append rows as the next part file, validated and atomic (temp file + rename)."""
    taken = [int(p.stem.rsplit("-", 1)[1]) for p in folder.glob(f"part-{iteration:04d}-*.parquet")]
    path = folder / f"part-{iteration:04d}-{max(taken, default=0) + 1:05d}.parquet"
    return write_table(rollouts_frame(rows), schema, path)


def read_parts(
    folder: Path, schema: pa.DataFrameSchema = ROLLOUTS, every_attempt: bool = False
) -> pl.DataFrame:
    """The rollouts under ``folder``: one row per rollout id, its latest attempt.

    Each part is validated; across parts, (rollout id, attempt) must be unique (a rollout
    retried with ``--retry-failed`` has a row per attempt; parts written before attempts were
    recorded count as attempt 0). ``every_attempt`` returns all rows, earlier attempts
    included (for audit). A damaged part raises ``GymflowError(CORRUPT_FILE)`` naming the file
    (delete it to collect its rollouts again); leftovers of writes a crash interrupted (hidden
    ``.tmp`` files) are not parts and are removed.
    """
    for stale in folder.glob(".part-*.tmp"):
        stale.unlink(missing_ok=True)
    frames = [read_table(p, schema) for p in sorted(folder.glob(PART_GLOB))]
    if not frames:
        return rollouts_frame([]).clear()
    df = pl.concat(frames, how="diagonal_relaxed")
    attempt = pl.col("attempt").fill_null(0) if "attempt" in df.columns else pl.lit(0)
    df = df.with_columns(attempt.cast(pl.Int64).alias("attempt"))
    df = validate(df, ROLLOUT_ATTEMPTS, str(folder))
    if every_attempt:
        return df
    latest = df.filter(pl.col("attempt") == pl.col("attempt").max().over("rollout_id"))
    return validate(latest, schema, str(folder))
