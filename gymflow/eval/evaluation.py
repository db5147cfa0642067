"""Evaluate a policy on tasks: per-task rows plus rates with 95 % intervals.

Greedy evaluation is one pass; sampled evaluation averages ``samples`` passes at temperature 1
(what GRPO's rollouts see). Failures are bucketed by kind. Each row also carries what the richer
report of ``gymflow eval`` needs (:mod:`gymflow.eval.metrics`): turns, tool calls and their
errors, tokens, the verifier's components, the server's usage, and a short excerpt of the answer.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from gymflow.agent.runner import AgentService
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import dataset_hash, read_tasks, write_tasks
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
    max_completion_tokens: int | None = None,
    keep_incomplete: bool = False,
    append: bool = False,
    agent: AgentService | None = None,
) -> tuple[list[dict], dict]:
    """Return ``(rows, summary)``; rows are one per (task, sample) with reward and failure kind.

    Episodes run through the one driver, ``len(tasks)`` live at once. With ``out_dir`` every
    episode is also stored as a rollout row (``out_dir/rollouts/``, ``out_dir/tasks.parquet``),
    the same layout as collections and GRPO's rollouts, with ``lineage`` (default: an
    ``eval`` run of this environment); a re-run replaces the folder's rows of that iteration,
    unless ``append`` (another environment's rows of the same evaluation are there: they stay,
    and its tasks join ``tasks.parquet``). An episode the environment or the backend could not
    finish fails the evaluation (``GymflowError`` of its kind) after the rows are stored: an
    incomplete evaluation must not pass for a measured one. With ``keep_incomplete`` it is a
    row instead (reward ``None``, ``scored`` False, its failure kind), counted as a failure.
    ``max_completion_tokens`` caps a whole episode (default: :class:`Sampling`'s). With
    ``agent`` the episodes run on agent servers (:mod:`gymflow.agent.runner`; ``policy`` and
    ``app`` unused) with the same plan, seeds and rows.
    """
    sampling = Sampling(max_new_tokens=max_new_tokens, greedy=greedy, temperature=temperature)
    if max_completion_tokens is not None:
        sampling = replace(sampling, max_completion_tokens=max_completion_tokens)
    passes = 1 if greedy else samples
    lineage = lineage or Lineage("eval", 0, 0, "", env.name, env.version, dataset_hash(tasks))
    planned = plan(tasks, lineage.run_id, lineage.iteration, passes, seed * 7919)
    results: list[tuple[Planned, Episode | None, GymflowError | None]] = []

    async def go() -> None:
        if agent is not None:
            runner = agent.runner(sampling, max(1, len(planned)))
            await runner(planned, lambda p, ep, err: results.append((p, ep, err)))
            return
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
        tasks_path = Path(out_dir) / "tasks.parquet"
        stored = tasks
        if not append:
            writer.drop_iterations_from(lineage.iteration)  # a re-run evaluation replaces its rows
        elif tasks_path.exists():
            ours = {t.task_id for t in tasks}
            stored = [t for t in read_tasks(tasks_path) if t.task_id not in ours] + tasks
        write_tasks(stored, tasks_path)
        for p, ep, error in results:
            writer.add(rollout_row(lineage, p, ep, error))
        writer.flush()
    failed = [(ep, error) for _, ep, error in results if error or ep.policy_failed]
    if failed and not keep_incomplete:
        ep, error = failed[0]
        kind = error.kind if error else FailureKind(ep.score["failure_kind"])
        detail = error.detail if error else ep.score["detail"]
        raise GymflowError(
            kind, f"{len(failed)} of {len(results)} evaluation episodes did not finish: {detail}"
        )
    rows = [episode_row(env, p, ep, error) for p, ep, error in results]
    return rows, summarize(rows)


def episode_row(
    env: Environment, planned: Planned, ep: Episode | None, error: GymflowError | None
) -> dict:
    """One evaluation row: what ``summarize`` reads plus the report's details (see module doc).

    An episode without a verdict (``error``, or the backend failed a turn) has reward ``None``
    and ``scored`` False: its failure kind counts, a reward of 0 would hide it.
    """
    base = {
        "env": env.name,
        "task_id": planned.task.task_id,
        "sample_idx": planned.sample_idx,
        "rollout_id": planned.rollout_id,
        "seed": planned.seed,
    }
    if ep is None or ep.policy_failed:
        kind = error.kind if error else ep.score["failure_kind"]
        detail = error.detail if error else ep.score["detail"]
        ep = ep or Episode(task=planned.task, seed=planned.seed)
        return {
            **base, **_episode_sizes(ep), "reward": None, "scored": False, "success": False,
            "well_formed": False, "unsafe": False, "failure_kind": str(kind),
            "failure_detail": detail, "components": {}, "answer": "",
        }  # fmt: skip
    valid = env.well_formed(ep.score, ep.items)
    return {
        **base,
        **_episode_sizes(ep),
        "reward": ep.reward,
        "scored": True,
        "success": bool(ep.score["success"]),
        "well_formed": valid,
        "unsafe": ep.score["components"].get("safe", 1.0) == 0.0 and valid,
        "failure_kind": ep.score["failure_kind"],
        "failure_detail": ep.score.get("detail") or None,
        "components": dict(ep.score["components"]),
        "answer": _answer_excerpt(ep.items),
    }


def _episode_sizes(ep: Episode) -> dict:
    outputs = [it for it in ep.items if it.get("type") == "function_call_output"]
    return {
        "turns": ep.turns,
        "tool_calls": ep.tool_calls,
        "tool_errors": sum(_is_error(it.get("output", "")) for it in outputs),
        "prompt_tokens": len(ep.prompt_ids),
        "completion_tokens": len(ep.completion_ids),
        "model_tokens": sum(ep.env_mask),
        "usage_prompt_tokens": ep.usage.get("prompt_tokens", 0),
        "usage_completion_tokens": ep.usage.get("completion_tokens", 0),
        "latency_s": ep.latency_s,
    }


def _is_error(output: str) -> bool:
    """A tool output the driver wrote for a failed call (``{"error": ...}``)."""
    try:
        value = json.loads(output)
    except ValueError:
        return False
    return isinstance(value, dict) and list(value) == ["error"]


def _answer_excerpt(items: list[dict], limit: int = 200) -> str:
    """The episode's last assistant output as text: its message, or its last turn's calls
    rendered (the tool outputs after them skipped)."""
    calls: list[dict] = []
    for item in reversed(items):
        kind = item.get("type")
        if kind == "function_call":
            calls.insert(0, item)
        elif calls:
            break
        elif kind == "message" and item.get("role") == "assistant":
            return str(item.get("content") or "")[:limit]
    return "".join(render_call(c["name"], _loaded(c["arguments"])) for c in calls)[:limit]


def _loaded(arguments: str):
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def summarize(rows: list[dict]) -> dict:
    """The rates the lifecycle's gate reads (keys and meanings fixed). ``reward`` is the mean
    over rows with a verdict (an unscored row has no reward, not 0); rates are over all rows."""
    n = len(rows)
    succ = sum(r["success"] for r in rows)
    valid = sum(r["well_formed"] for r in rows)
    unsafe = sum(r["unsafe"] for r in rows)
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    return {
        "n": n,
        "success": succ / max(1, n),
        "success_ci95": list(wilson(succ, n)),
        "reward": sum(rewards) / max(1, len(rewards)),
        "reward_ci95": list(mean_ci(rewards)),
        "well_formed": valid / max(1, n),
        "well_formed_ci95": list(wilson(valid, n)),
        "unsafe_rate": unsafe / max(1, n),
        "failures": dict(Counter(r["failure_kind"] or "none" for r in rows)),
        "mean_completion_tokens": sum(r["completion_tokens"] for r in rows) / max(1, n),
    }


def per_task_success(rows: list[dict]) -> dict[str, float]:
    """Mean success per task id (over samples), for paired comparisons."""
    return per_task_mean(rows, "success")


def per_task_mean(rows: list[dict], key: str) -> dict[str, float]:
    """Mean of ``key`` per task id over its samples (rows where it is ``None`` left out; a task
    with none left is absent), for paired comparisons."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        if r[key] is not None:
            acc.setdefault(r["task_id"], []).append(float(r[key]))
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
