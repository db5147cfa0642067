"""Stage 1: generate tasks, dedup, split, refuse leakage, write Parquet, log MLflow datasets.

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

from prefect import task
from prefect.artifacts import create_table_artifact

from gymflow.data.coverage import coverage_gaps, coverage_rows, plot_coverage
from gymflow.data.heldout_record import log_record, recorded_heldout
from gymflow.data.task_set import assemble_tasks
from gymflow.data.task_table import dataset_hash, tasks_frame, write_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import TaskData
from gymflow.rollout.task_variants import add_variants, write_report
from gymflow.tasks.options import STAGE_OPTIONS

SPLITS = ("train", "val", "heldout")


@task(name="generate_tasks", **STAGE_OPTIONS)
def generate_tasks(run: RunContext, cfg: LifecycleConfig) -> TaskData:
    import mlflow

    with stage(run, "generate_tasks") as info:
        env = get_env(cfg.env)
        settings = cfg.task_data
        recorded = recorded_heldout(cfg.env, run.run_id) if settings.recorded_heldout else []
        built = assemble_tasks(
            env, cfg.n_tasks, cfg.task_seed, cfg.heldout_frac, cfg.val_frac, settings, recorded
        )
        tasks, dedup_counts = built.tasks, dict(built.counts)
        out = run.dir / "data"
        if cfg.variants is not None:
            report = add_variants(
                env, tasks, cfg.variants, settings.near_dup, recorded, cfg.task_seed
            )
            tasks = tasks + report.kept
            write_report(report, out / "variants.jsonl")
            dedup_counts |= {f"variants_{k}": v for k, v in report.counts().items()}
            create_table_artifact(
                key="task-variants",
                table=[{"verdict": k, "variants": v} for k, v in report.counts().items()],
                description=f"Variants asked of {cfg.variants.teacher} and what became of "
                "each (data/variants.jsonl).",
            )
        paths, hashes = {}, {}
        for split in SPLITS:
            part = [t for t in tasks if t.split == split]
            paths[split] = str(write_tasks(part, out / f"tasks-{split}.parquet"))
            hashes[split] = dataset_hash(part)
            dataset = mlflow.data.from_polars(
                tasks_frame(part), source=paths[split], name=f"{cfg.env}-{split}",
                digest=hashes[split],
            )  # fmt: skip
            mlflow.log_input(dataset, context=split, tags={"dataset_hash": hashes[split]})
        (out / "dropped_near_heldout.jsonl").write_text(
            "".join(json.dumps(_dropped_row(leak)) + "\n" for leak in built.dropped)
        )
        log_record(cfg.env, [t for t in tasks if t.split == "heldout"], out)
        counts = Counter(t.split for t in tasks)
        mlflow.log_params(
            {"env": cfg.env, "env_version": env.version, "n_drafts": cfg.n_tasks,
             "dataset_hash": dataset_hash(tasks),
             **({"variants_teacher": cfg.variants.teacher} if cfg.variants else {}),
             **{f"dataset_hash_{split}": h for split, h in hashes.items()}}
        )  # fmt: skip
        mlflow.log_metrics({f"tasks_{k}": v for k, v in counts.items()})
        mlflow.log_metrics({f"dedup_{k}": v for k, v in dedup_counts.items()})
        mlflow.log_artifacts(str(out), artifact_path="data")
        coverage = _report_coverage(env, tasks, run.dir / "reports")
    return TaskData(
        paths=paths,
        counts=dict(counts),
        dataset_hash=dataset_hash(tasks),
        env_version=env.version,
        split_hashes=hashes,
        dedup=dedup_counts,
        coverage=str(coverage),
        stage=info,
    )


def _report_coverage(env, tasks, folder):
    """Coverage per tool / template / difficulty / source: JSON + PNG in MLflow, a Prefect table."""
    import mlflow

    rows = coverage_rows(env, tasks)
    gaps = coverage_gaps(rows)
    path = folder / "coverage.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows, "gaps": gaps}, indent=2))
    mlflow.log_artifact(str(path), artifact_path="reports")
    mlflow.log_artifact(str(plot_coverage(rows, folder / "coverage.png")), artifact_path="reports")
    mlflow.log_metric("coverage_gaps", len(gaps))
    create_table_artifact(
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
