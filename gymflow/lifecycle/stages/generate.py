"""Stage 1: generate tasks, dedup, split, refuse leakage, write Parquet, log MLflow datasets.

A run on a mix of environments (``LifecycleConfig.envs``) does all of it per environment, each
with its share of the drafts; the split files hold every environment's tasks (``Task.env``).

The leakage check runs here, before anything is written, because this stage's output is what
every training stage reads: a held-out task (this run's, an added file's, or one an earlier
run of the environment recorded in MLflow) or a near-duplicate of one in the train split stops
the run with ``data_leakage`` (:func:`gymflow.data.task_set.assemble_tasks`). With
``variants`` set, a teacher policy writes variants of train tasks; those whose gold answer the
environment accepts and that repeat no task join the train split
(:func:`gymflow.rollout.task_variants.add_variants`; every verdict in ``data/variants.jsonl``).
"""

from __future__ import annotations

import json
from collections import Counter

from gymflow.data.coverage import coverage_gaps, coverage_rows, plot_coverage
from gymflow.data.env_mix import apportion
from gymflow.data.heldout_record import log_record, recorded_heldout
from gymflow.data.task_set import assemble_tasks
from gymflow.data.task_table import dataset_hash, tasks_frame, write_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.prefect_artifacts import table_artifact
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import EnvTaskData, TaskData
from gymflow.rollout.task_variants import add_variants, write_report

SPLITS = ("train", "val", "heldout")


def generate_tasks(run: RunContext, cfg: LifecycleConfig) -> TaskData:
    """Each environment of the run gets its share of ``n_tasks`` drafts (by weight), its own
    dedup, splits and leakage check; the split files hold every environment's tasks."""
    import mlflow

    with stage(run, "generate_tasks") as info:
        settings, out = cfg.task_data, run.dir / "data"
        drafts = apportion(cfg.n_tasks, cfg.env_weights)
        tasks, dedup_counts, dropped, per_env = [], Counter(), [], {}
        for name, n in drafts.items():
            env = get_env(name)
            recorded = recorded_heldout(name, run.run_id) if settings.recorded_heldout else []
            built = assemble_tasks(
                env, n, cfg.task_seed, cfg.heldout_frac, cfg.val_frac, settings, recorded
            )
            mine = built.tasks
            dedup_counts.update(built.counts)
            dropped += built.dropped
            if cfg.variants is not None:  # one environment only (the config refuses a mix)
                report = add_variants(
                    env, mine, cfg.variants, settings.near_dup, recorded, cfg.task_seed
                )
                mine = mine + report.kept
                write_report(report, out / "variants.jsonl")
                dedup_counts.update({f"variants_{k}": v for k, v in report.counts().items()})
                table_artifact(
                    key="task-variants",
                    table=[{"verdict": k, "variants": v} for k, v in report.counts().items()],
                    description=f"Variants asked of {cfg.variants.teacher} and what became of "
                    "each (data/variants.jsonl).",
                )
            tasks += mine
            per_env[name] = EnvTaskData(
                env_version=env.version,
                counts={split: sum(t.split == split for t in mine) for split in SPLITS},
                split_hashes={s: dataset_hash([t for t in mine if t.split == s]) for s in SPLITS},
            )
        paths, hashes = {}, {}
        for split in SPLITS:
            part = [t for t in tasks if t.split == split]
            paths[split] = str(write_tasks(part, out / f"tasks-{split}.parquet"))
            hashes[split] = dataset_hash(part)
            for name, env_data in per_env.items():  # one MLflow dataset per environment
                mine = [t for t in part if t.env == name]
                dataset = mlflow.data.from_polars(
                    tasks_frame(mine), source=paths[split], name=f"{name}-{split}",
                    digest=env_data.split_hashes[split],
                )  # fmt: skip
                tags = {"dataset_hash": env_data.split_hashes[split]}
                mlflow.log_input(dataset, context=split, tags=tags)
        (out / "dropped_near_heldout.jsonl").write_text(
            "".join(json.dumps(_dropped_row(leak)) + "\n" for leak in dropped)
        )
        _record_heldout(run, cfg, [t for t in tasks if t.split == "heldout"], out)
        counts = Counter(t.split for t in tasks)
        env_version = _env_version(per_env)
        mlflow.log_params(
            {"env": cfg.env_label, "env_version": env_version, "n_drafts": cfg.n_tasks,
             "dataset_hash": dataset_hash(tasks),
             **({"env_weights": json.dumps(cfg.envs)} if cfg.envs is not None else {}),
             **({"variants_teacher": cfg.variants.teacher} if cfg.variants else {}),
             **{f"dataset_hash_{split}": h for split, h in hashes.items()}}
        )  # fmt: skip
        mlflow.log_metrics({f"tasks_{k}": v for k, v in counts.items()})
        if cfg.envs is not None:
            mlflow.log_metrics(
                {f"tasks_{name}_{split}": n for name, d in per_env.items()
                 for split, n in d.counts.items()}
            )  # fmt: skip
        mlflow.log_metrics({f"dedup_{k}": v for k, v in dedup_counts.items()})
        mlflow.log_artifacts(str(out), artifact_path="data")
        coverage = _report_coverage(list(per_env), tasks, run.dir / "reports")
    return TaskData(
        paths=paths,
        counts=dict(counts),
        dataset_hash=dataset_hash(tasks),
        env_version=env_version,
        split_hashes=hashes,
        dedup=dict(dedup_counts),
        coverage=str(coverage),
        envs=per_env,
        stage=info,
    )


def _env_version(per_env: dict[str, EnvTaskData]) -> str:
    """The environment's version; a mix's as ``name=version`` pairs (``tool_call=1,math=2``)."""
    if len(per_env) == 1:
        return next(iter(per_env.values())).env_version
    return ",".join(f"{name}={d.env_version}" for name, d in per_env.items())


def _record_heldout(run: RunContext, cfg: LifecycleConfig, heldout, out) -> None:
    """Record the held-out prompts for later runs of each environment to keep clear of. A mix
    records each environment's in a nested MLflow run of its own (the record's tag names one
    environment), tagged with the run id so that a resumed run skips its own."""
    import mlflow

    if cfg.envs is None:
        log_record(cfg.env, heldout, out)
        return
    for name in cfg.env_weights:
        mine = [t for t in heldout if t.env == name]
        tags = {"gymflow.run_id": run.run_id}
        with mlflow.start_run(run_name=f"heldout-record-{name}", nested=True, tags=tags):
            log_record(name, mine, out / "heldout" / name)


def _report_coverage(envs: list[str], tasks, folder):
    """Coverage per tool / template / difficulty / source: JSON + PNG in MLflow, a Prefect table.
    A mix's values are prefixed with their environment (``math: level=2``)."""
    import mlflow

    rows = []
    for name in envs:
        mine = coverage_rows(get_env(name), [t for t in tasks if t.env == name])
        rows += mine if len(envs) == 1 else [r | {"value": f"{name}: {r['value']}"} for r in mine]
    gaps = coverage_gaps(rows)
    path = folder / "coverage.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows, "gaps": gaps}, indent=2))
    mlflow.log_artifact(str(path), artifact_path="reports")
    mlflow.log_artifact(str(plot_coverage(rows, folder / "coverage.png")), artifact_path="reports")
    mlflow.log_metric("coverage_gaps", len(gaps))
    table_artifact(
        key="task-coverage",
        table=rows,
        description=f"Tasks per split by tool, template, difficulty and source; {len(gaps)} "
        "values held out but never trained on or the reverse (reports/coverage.json).",
    )
    return path


def _dropped_row(leak) -> dict:
    return {
        "train_task_id": leak.train.id,
        "heldout_id": leak.heldout.id,
        "heldout_origin": leak.heldout.origin,
        "similarity": leak.similarity,
    }
