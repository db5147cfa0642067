"""Stages 4 and 5: SFT on a small demonstration set, then GRPO on the larger task pool.

Demonstrations are the first ``cfg.demos`` train tasks (seeded shuffle) with their gold
answers; GRPO's pool is every other train task and sees only the verifier, never a gold answer.
``sft_control`` spends GRPO's measured wall time on more SFT over the same demonstrations, so
the gain of RL is measured against the cheap alternative too.
"""

from __future__ import annotations

import random
from pathlib import Path

from prefect import task

from gymflow.config import LifecycleConfig
from gymflow.env_registry import get_env
from gymflow.evaluation import evaluate_policy
from gymflow.grpo import RolloutSource, run_grpo
from gymflow.policy import TransformersPolicy
from gymflow.resources_server import build_app
from gymflow.rollout_store import episode_rows, write_rollouts
from gymflow.run_context import RunContext, stage
from gymflow.sft import demonstrations, run_sft
from gymflow.task_table import read_tasks
from tasks.options import STAGE_OPTIONS


def split_train(cfg: LifecycleConfig, data: dict):
    train = read_tasks(data["paths"]["train"])
    random.Random(cfg.seed).shuffle(train)
    return train[: cfg.demos], train[cfg.demos :]


def _sft(
    run: RunContext, cfg: LifecycleConfig, data: dict, start: str, out: Path, budget_s: float | None
) -> dict:
    from transformers import AutoTokenizer

    env = get_env(cfg.env)
    app = build_app(env)
    demos_t, _ = split_train(cfg, data)
    val = read_tasks(data["paths"]["val"])[: cfg.val_eval_n]
    demos = demonstrations(env, AutoTokenizer.from_pretrained(start), demos_t)

    def sampled_success(model, tokenizer) -> float:
        _, summary = evaluate_policy(
            env, app, TransformersPolicy(model, tokenizer), val, greedy=False,
            temperature=cfg.grpo.temperature, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed + 17,
        )  # fmt: skip
        return summary["success"]

    # The control trains for a wall-time budget, not up to the GRPO start's target.
    control = {"max_steps": 100_000, "target_sampled_success": 1.01}
    settings = cfg.sft if budget_s is None else cfg.sft.model_copy(update=control)
    return run_sft(
        Path(start), out, demos, settings, evaluate=sampled_success, time_budget_s=budget_s
    )


@task(name="sft", **STAGE_OPTIONS)
def sft_stage(run: RunContext, cfg: LifecycleConfig, data: dict, policy: dict) -> dict:
    with stage(run, "sft") as info:
        result = _sft(run, cfg, data, policy["path"], run.dir / "sft", None)
    return {**result, "demos": cfg.demos, **info}


@task(name="grpo", **STAGE_OPTIONS)
def grpo_stage(run: RunContext, cfg: LifecycleConfig, data: dict, start: dict) -> dict:
    import mlflow

    with stage(run, "grpo") as info:
        env = get_env(cfg.env)
        _, pool = split_train(cfg, data)
        rollout_dir = run.dir / "rollouts"
        g = cfg.grpo.num_generations

        def store(episodes, used, step):
            rows = episode_rows(
                episodes, used, run.run_id, step, step, data["env_version"], data["dataset_hash"], g
            )
            write_rollouts(rows, rollout_dir / f"iter-{step:05d}.parquet")
            rewards = [r["reward"] for r in rows if r["used_for_training"]]
            mlflow.log_metrics(
                {
                    "rollouts/reward_mean": sum(rewards) / len(rewards),
                    "rollouts/success_rate": sum(r["success"] for r in rows) / len(rows),
                    "rollouts/generated": len(rows),
                },
                step=step,
            )

        source = RolloutSource(env, build_app(env), pool, cfg.grpo, store)
        result = run_grpo(Path(start["path"]), run.dir / "grpo", source, cfg.grpo)
        mlflow.log_metrics(
            {f"dynamic_sampling/{k}": v for k, v in result["dynamic_sampling"].items()}
        )
        mlflow.log_artifacts(str(rollout_dir), artifact_path="rollouts")
        mlflow.log_artifacts(result["path"], artifact_path="policy")
        result.pop("log_history")
    return {
        **result,
        "rollout_dir": str(rollout_dir),
        "pool": len(pool),
        "start": start["path"],
        **info,
    }


@task(name="sft_control", **STAGE_OPTIONS)
def sft_control_stage(
    run: RunContext, cfg: LifecycleConfig, data: dict, start: dict, budget_s: float
) -> dict:
    """More SFT from GRPO's start, on the same demonstrations, for GRPO's wall time."""
    with stage(run, "sft_control") as info:
        result = _sft(run, cfg, data, start["path"], run.dir / "sft_control", budget_s)
    return {**result, "budget_s": budget_s, **info}
