"""Stages 3 and 6: evaluate a policy on a split (baseline on val; candidates on held-out)."""

from __future__ import annotations

import json

import polars as pl

from gymflow.agent.runner import AgentService
from gymflow.data.env_mix import apportion
from gymflow.data.schemas import EVAL_ROWS, write_table
from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.eval_engine import EvalEngine
from gymflow.eval.evaluation import evaluate_policy, summarize
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import BaselineEval, Checkpoint, Evaluation, Split, TaskData
from gymflow.rollout.store import Lineage
from gymflow.train.sft_decision import decide_sft


def evaluate_split(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    policy_path: str,
    split: Split,
    label: str,
    limit: int | None,
) -> Evaluation:
    """Greedy evaluation of one policy; per-task rows go to Parquet, rates to MLflow, and every
    episode to ``eval/<split>-<label>/rollouts/`` (the rollout layout ``gymflow rollouts
    export`` reads).

    Each environment of the run is evaluated on its own tasks of the split through its own
    in-process server; ``limit`` caps the tasks, a mix's shared by weight. The summary pools
    every environment's rows (one weight per task); ``per_env`` has each one's. With
    ``cfg.agent_servers`` the episodes run there (:mod:`gymflow.agent.runner`), row for row.
    The policy generates on ``cfg.eval_engine`` (:mod:`gymflow.eval.eval_engine`), stopped
    when the evaluation ends, and the episodes' lineage names it (``vllm:PATH``)."""
    import mlflow

    tasks = read_tasks(data.paths[split])
    weights = cfg.env_weights
    limits = apportion(limit, weights) if limit is not None else dict.fromkeys(weights)
    rows, per_env = [], {}
    with EvalEngine(cfg.eval_engine) as engine:
        spec = engine.spec(policy_path)
        agent = None  # agent servers run the episodes (and load the policy) when the run names them
        if cfg.agent_servers:
            policy, agent = None, AgentService(tuple(cfg.agent_servers), spec)
        else:
            policy = engine.policy(policy_path)
        for i, (name, cap) in enumerate(limits.items()):
            env = get_env(name)
            app = build_app(env)
            mine = [t for t in tasks if t.env == name][:cap]
            lineage = Lineage(run.run_id, 0, 0, spec, env.name, env.version, data.dataset_hash)
            try:
                env_rows, per_env[name] = evaluate_policy(
                    env, app, policy, mine, greedy=True, max_new_tokens=cfg.max_new_tokens,
                    seed=cfg.seed, out_dir=run.dir / "eval" / f"{split}-{label}",
                    lineage=lineage, append=i > 0, agent=agent,
                )  # fmt: skip
            finally:
                app.state.verifier.shutdown()  # a heavy verifier's process pool (math, code)
            rows += env_rows
    summary = per_env[cfg.env] if len(per_env) == 1 else summarize(rows)
    frame = pl.DataFrame(  # failure_kind is all None when every episode succeeded
        [{**r, "policy": label} for r in rows], schema_overrides={"failure_kind": pl.String}
    ).select(list(EVAL_ROWS.columns))
    path = write_table(frame, EVAL_ROWS, run.dir / "eval" / f"{split}-{label}.parquet")
    mlflow.log_artifact(str(path), artifact_path="eval")
    mlflow.log_metrics({f"{label}/{k}": v for k, v in _numbers(summary).items()})
    if len(per_env) > 1:
        mlflow.log_metrics(
            {f"{label}/{name}/{k}": v for name, s in per_env.items()
             for k, v in _numbers(s).items()}
        )  # fmt: skip
    mlflow.log_dict(summary | {"per_env": per_env}, f"eval/{split}-{label}.json")
    return Evaluation(summary=summary, rows=str(path), per_env=per_env)


def _numbers(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if isinstance(v, int | float)}


def evaluate_baseline(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> BaselineEval:
    """The current policy on val; decides whether SFT is needed first (format rate, per
    environment)."""
    with stage(run, "baseline_eval") as info:
        result = evaluate_split(run, cfg, data, policy.path, "val", "current", cfg.val_eval_n * 2)
        rates = {name: s["well_formed"] for name, s in result.per_env.items()}
        decision = decide_sft(cfg.sft.run, rates, cfg.format_threshold)
        import mlflow

        mlflow.log_params({"needs_sft": decision.run, "sft_decision": decision.reason[:500]})
        mlflow.log_text(json.dumps(result.summary, indent=2), "baseline_summary.json")
    return BaselineEval(evaluation=result, sft=decision, stage=info)
