"""Stages 3 and 6: evaluate a policy on a split (baseline on val; candidates on held-out)."""

from __future__ import annotations

import json

import polars as pl
from prefect import task

from gymflow.data.schemas import EVAL_ROWS, write_table
from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import BaselineEval, Checkpoint, Evaluation, Split, TaskData
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import Lineage
from gymflow.tasks.options import STAGE_OPTIONS


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
    export`` reads)."""
    import mlflow

    env = get_env(cfg.env)
    tasks = read_tasks(data.paths[split])[:limit]
    spec = f"transformers:{policy_path}"
    lineage = Lineage(run.run_id, 0, 0, spec, env.name, env.version, data.dataset_hash)
    rows, summary = evaluate_policy(
        env, build_app(env), TransformersPolicy.from_path(policy_path), tasks, greedy=True,
        max_new_tokens=cfg.max_new_tokens, seed=cfg.seed,
        out_dir=run.dir / "eval" / f"{split}-{label}", lineage=lineage,
    )  # fmt: skip
    frame = pl.DataFrame(  # failure_kind is all None when every episode succeeded
        [{**r, "policy": label} for r in rows], schema_overrides={"failure_kind": pl.String}
    ).select(list(EVAL_ROWS.columns))
    path = write_table(frame, EVAL_ROWS, run.dir / "eval" / f"{split}-{label}.parquet")
    mlflow.log_artifact(str(path), artifact_path="eval")
    flat = {k: v for k, v in summary.items() if isinstance(v, int | float)}
    mlflow.log_metrics({f"{label}/{k}": v for k, v in flat.items()})
    mlflow.log_dict(summary, f"eval/{split}-{label}.json")
    return Evaluation(summary=summary, rows=str(path))


@task(name="baseline_eval", **STAGE_OPTIONS)
def baseline_eval(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> BaselineEval:
    """The current policy on val; decides whether SFT is needed first (format rate)."""
    with stage(run, "baseline_eval") as info:
        result = evaluate_split(run, cfg, data, policy.path, "val", "current", cfg.val_eval_n * 2)
        needs_sft = result.summary["valid_json"] < cfg.format_threshold
        import mlflow

        mlflow.log_param("needs_sft", needs_sft)
        mlflow.log_text(json.dumps(result.summary, indent=2), "baseline_summary.json")
    return BaselineEval(evaluation=result, needs_sft=needs_sft, stage=info)
