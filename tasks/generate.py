"""Stage 1: generate tasks, dedup, split by content hash, write Parquet, log MLflow datasets."""

from __future__ import annotations

from collections import Counter

from prefect import task

from gymflow.data.task_set import build_tasks
from gymflow.data.task_table import dataset_hash, tasks_frame, write_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import TaskData
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="generate_tasks", **STAGE_OPTIONS)
def generate_tasks(run: RunContext, cfg: LifecycleConfig) -> TaskData:
    import mlflow

    with stage(run, "generate_tasks") as info:
        env = get_env(cfg.env)
        tasks = build_tasks(env, cfg.n_tasks, cfg.task_seed, cfg.heldout_frac, cfg.val_frac)
        out = run.dir / "data"
        paths = {}
        for split in ("train", "val", "heldout"):
            part = [t for t in tasks if t.split == split]
            paths[split] = str(write_tasks(part, out / f"tasks-{split}.parquet"))
            dataset = mlflow.data.from_polars(
                tasks_frame(part), source=paths[split], name=f"{cfg.env}-{split}"
            )
            mlflow.log_input(dataset, context=split)
        counts = Counter(t.split for t in tasks)
        mlflow.log_params({"env": cfg.env, "env_version": env.version, "n_drafts": cfg.n_tasks})
        mlflow.log_metrics({f"tasks_{k}": v for k, v in counts.items()})
        mlflow.log_artifacts(str(out), artifact_path="data")
    return TaskData(
        paths=paths,
        counts=dict(counts),
        dataset_hash=dataset_hash(tasks),
        env_version=env.version,
        stage=info,
    )
