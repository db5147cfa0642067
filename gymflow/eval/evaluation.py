"""Evaluate a policy on tasks: per-task rows plus rates with 95 % intervals.

Greedy evaluation is one pass; sampled evaluation averages ``samples`` passes at temperature 1
(what GRPO's rollouts see). Failures are bucketed by kind.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from gymflow.core.failures import FailureKind
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.eval.stats import mean_ci, wilson
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling


def evaluate_policy(
    env: Environment,
    app,
    policy: TransformersPolicy,
    tasks: list[Task],
    greedy: bool = True,
    samples: int = 1,
    max_new_tokens: int = 48,
    seed: int = 0,
    temperature: float = 1.0,
) -> tuple[list[dict], dict]:
    """Return ``(rows, summary)``; rows are one per (task, sample) with reward and failure kind."""
    sampling = Sampling(max_new_tokens=max_new_tokens, greedy=greedy, temperature=temperature)
    passes = 1 if greedy else samples

    async def go():
        async with EnvClient(app=app) as client:
            out = []
            for k in range(passes):
                seeds = [seed * 7919 + k * 100_003 + i for i in range(len(tasks))]
                out.append(await run_episodes(client, env, policy, tasks, sampling, seeds))
            return out

    rows = []
    for k, episodes in enumerate(asyncio.run(go())):
        for ep in episodes:
            valid = _well_formed(ep.score)
            rows.append(
                {
                    "task_id": ep.task.task_id,
                    "sample_idx": k,
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

    async def go():
        async with EnvClient(app=app) as client:
            sampling = Sampling(max_new_tokens=max_new_tokens)
            return await run_episodes(
                client, env, policy, tasks, sampling, [seed + i for i in range(len(tasks))]
            )

    out = {}
    for ep in asyncio.run(go()):
        texts = [it.get("content", "") for it in ep.items if it.get("role") == "assistant"]
        calls = [it for it in ep.items if it["type"] == "function_call"]
        out[ep.task.task_id] = texts[-1] if texts else _calls_text(calls)
    return out


def _calls_text(calls: list[dict]) -> str:
    return "".join(render_call(c["name"], json.loads(c["arguments"])) for c in calls)
