"""Evaluate a policy on tasks: per-task rows plus rates with 95 % intervals.

Greedy evaluation is one pass; sampled evaluation averages ``samples`` passes at temperature 1
(what GRPO's rollouts see). Failures are bucketed by kind.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import dataset_hash, write_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.eval.stats import mean_ci, wilson
from gymflow.policy.base import ChatPolicy, Policy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.driver import run_episodes, run_window
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS, Episode, Sampling
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.store import Lineage, Planned, RolloutWriter, plan, rollout_row


def evaluate_policy(
    env: Environment,
    app,
    policy: Policy | ChatPolicy,
    tasks: list[Task],
    greedy: bool = True,
    samples: int = 1,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    seed: int = 0,
    temperature: float = 1.0,
    out_dir: Path | None = None,
    lineage: Lineage | None = None,
) -> tuple[list[dict], dict]:
    """Return ``(rows, summary)``; rows are one per (task, sample) with reward and failure kind.

    Episodes run through the one driver, ``len(tasks)`` live at once. With ``out_dir`` every
    episode is also stored as a rollout row (``out_dir/rollouts/``, ``out_dir/tasks.parquet``),
    the same layout as collections and GRPO's rollouts, with ``lineage`` (default: an
    ``eval`` run of this environment). An episode the environment or the backend could not
    finish fails the evaluation (``GymflowError`` of its kind) after the rows are stored: an
    incomplete evaluation must not pass for a measured one.
    """
    sampling = Sampling(max_new_tokens=max_new_tokens, greedy=greedy, temperature=temperature)
    passes = 1 if greedy else samples
    lineage = lineage or Lineage("eval", 0, 0, "", env.name, env.version, dataset_hash(tasks))
    planned = plan(tasks, lineage.run_id, lineage.iteration, passes, seed * 7919)
    results: list[tuple[Planned, Episode | None, GymflowError | None]] = []

    async def go() -> None:
        async with EnvClient(app=app) as client:
            turns = ModelTurns(policy, sampling)
            await run_window(
                client, env, turns, planned, max(1, len(tasks)),
                lambda p, ep, err: results.append((p, ep, err)),
            )  # fmt: skip

    asyncio.run(go())
    order = {p.rollout_id: i for i, p in enumerate(planned)}
    results.sort(key=lambda r: order[r[0].rollout_id])
    if out_dir is not None:
        schema = collected_rollouts(passes, env.reward_range)
        writer = RolloutWriter(out_dir, schema, chunk=len(results))
        writer.drop_iterations_from(lineage.iteration)  # a re-run evaluation replaces its rows
        write_tasks(tasks, Path(out_dir) / "tasks.parquet")
        for p, ep, error in results:
            writer.add(rollout_row(lineage, p, ep, error))
        writer.flush()
    failed = [(ep, error) for _, ep, error in results if error or ep.policy_failed]
    if failed:
        ep, error = failed[0]
        kind = error.kind if error else FailureKind(ep.score["failure_kind"])
        detail = error.detail if error else ep.score["detail"]
        raise GymflowError(
            kind, f"{len(failed)} of {len(results)} evaluation episodes did not finish: {detail}"
        )
    rows = []
    for p, ep, _ in results:
        valid = _well_formed(ep.score)
        rows.append(
            {
                "task_id": ep.task.task_id,
                "sample_idx": p.sample_idx,
                "reward": ep.reward,
                "success": bool(ep.score["success"]),
                "valid_json": valid,
                "unsafe": ep.score["components"].get("safe", 1.0) == 0.0 and valid,
                "failure_kind": ep.score["failure_kind"],
                "completion_tokens": len(ep.completion_ids),
                "latency_s": ep.latency_s,
            }
        )
    return rows, summarize(rows)


def _well_formed(score: dict) -> bool:
    """Every turn parsed: the verifier's ``format`` component where it reports one (tool_call),
    else no ``invalid_json`` failure (verifiers such as workplace's score outcomes only)."""
    if "format" in score["components"]:
        return score["components"]["format"] == 1.0
    return score["failure_kind"] != FailureKind.INVALID_JSON


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    succ = sum(r["success"] for r in rows)
    valid = sum(r["valid_json"] for r in rows)
    unsafe = sum(r["unsafe"] for r in rows)
    rewards = [r["reward"] for r in rows]
    return {
        "n": n,
        "success": succ / max(1, n),
        "success_ci95": list(wilson(succ, n)),
        "reward": sum(rewards) / max(1, n),
        "reward_ci95": list(mean_ci(rewards)),
        "valid_json": valid / max(1, n),
        "valid_json_ci95": list(wilson(valid, n)),
        "unsafe_rate": unsafe / max(1, n),
        "failures": dict(Counter(r["failure_kind"] or "none" for r in rows)),
        "mean_completion_tokens": sum(r["completion_tokens"] for r in rows) / max(1, n),
    }


def per_task_success(rows: list[dict]) -> dict[str, float]:
    """Mean success per task id (over samples), for paired comparisons."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        acc.setdefault(r["task_id"], []).append(float(r["success"]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def sample_texts(
    env: Environment, policy_path: str, tasks: list[Task], max_new_tokens: int, seed: int
) -> dict:
    """What the policy at ``policy_path`` writes (sampled) for each task, by task id."""
    from gymflow.env.resources_server import build_app

    policy = TransformersPolicy.from_path(policy_path)
    app = build_app(env)

    async def go() -> list[Episode]:
        async with EnvClient(app=app) as client:
            sampling = Sampling(max_new_tokens=max_new_tokens)
            seeds = [seed + i for i in range(len(tasks))]
            return await run_episodes(client, env, policy, tasks, sampling, seeds)

    out = {}
    for ep in asyncio.run(go()):
        texts = [it.get("content", "") for it in ep.items if it.get("role") == "assistant"]
        calls = [it for it in ep.items if it["type"] == "function_call"]
        out[ep.task.task_id] = texts[-1] if texts else _calls_text(calls)
    return out


def _calls_text(calls: list[dict]) -> str:
    return "".join(render_call(c["name"], json.loads(c["arguments"])) for c in calls)
