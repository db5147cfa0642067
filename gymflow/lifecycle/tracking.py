"""MLflow helpers: a project-local sqlite store, one parent run per lifecycle run, nested stages.

MLflow 3 refuses a plain ``file:`` store, so tracking and registry live in
``sqlite:///<home>/mlruns/mlflow.db`` with artifacts under ``<home>/mlruns/artifacts``.
A lifecycle run is found again by its ``gymflow.run_id`` tag, so a resumed run logs into the
same parent run instead of starting a new one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

EXPERIMENT = "gymflow"
EXPERIMENT_TAGS = {
    # Open the experiment on its training runs, not on MLflow's GenAI overview.
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.note.content": (
        "gymflow lifecycle runs. Each run `lifecycle-<run id>` is a parent run with one nested "
        "run per stage (generate_tasks, resolve_policy, profile_verifier, baseline_eval, sft, "
        "grpo, sft_control, heldout_gate, promote). The parent run holds the config (artifact "
        "`config.json` and flattened params), the summary table as its description, the plots "
        "under `plots/`, `report.md`, and the Prefect flow run's id and address as tags "
        "(`prefect.flow_run_url`). Registered models: `gymflow-<env>`, aliases `champion`, "
        "`previous_champion`, `challenger`."
    ),
}


def configure(home: Path) -> str:
    """Point MLflow at the project-local store (env vars, so TRL's callback agrees)."""
    mlruns = (home / "mlruns").resolve()
    mlruns.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{mlruns / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ["MLFLOW_EXPERIMENT_NAME"] = EXPERIMENT
    import mlflow

    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        mlflow.create_experiment(
            EXPERIMENT, artifact_location=(mlruns / "artifacts").as_uri(), tags=EXPERIMENT_TAGS
        )
    elif any(experiment.tags.get(k) != v for k, v in EXPERIMENT_TAGS.items()):
        for key, value in EXPERIMENT_TAGS.items():  # a store made before these tags existed
            mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id, key, value)
    mlflow.set_experiment(EXPERIMENT)
    return uri


def flatten(values: dict, prefix: str = "") -> dict[str, str]:
    """``{"grpo": {"learning_rate": 1e-4}}`` -> ``{"grpo.learning_rate": "0.0001"}``."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = str(value)[:6000]
    return out


def log_config(parent_id: str, config_file: Path, values: dict) -> None:
    """The run's config on its parent run: ``config.json`` as an artifact, every field as a
    param. MLflow params never change, so a resumed run whose config was changed keeps the
    first values and records each change as a ``config.changed.<field>`` tag."""
    from mlflow import MlflowClient
    from mlflow.entities import Param

    client = MlflowClient()
    client.log_artifact(parent_id, str(config_file))
    logged = client.get_run(parent_id).data.params
    flat = flatten(values)
    new = [Param(k, v) for k, v in flat.items() if k not in logged]
    for start in range(0, len(new), 100):  # MLflow takes at most 100 params a batch
        client.log_batch(parent_id, params=new[start : start + 100])
    for key, value in flat.items():
        if key in logged and logged[key] != value:
            client.set_tag(parent_id, f"config.changed.{key}", f"{logged[key]} -> {value}")


def parent_run_id(run_id: str, params: dict | None = None) -> str:
    """The MLflow run of lifecycle run ``run_id``: found by tag, created on first use."""
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient()
    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    found = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`gymflow.run_id` = '{run_id}' and tags.`gymflow.kind` = 'lifecycle'",
        max_results=1,
    )
    if found:
        return found[0].info.run_id
    run = client.create_run(
        exp.experiment_id,
        run_name=f"lifecycle-{run_id}",
        tags={"gymflow.run_id": run_id, "gymflow.kind": "lifecycle"},
    )
    if params:
        for key, value in params.items():
            client.log_param(run.info.run_id, key, str(value)[:6000])
    return run.info.run_id


@contextlib.contextmanager
def stage_run(parent_id: str, stage: str, run_id: str) -> Iterator[object]:
    """A nested MLflow run for one stage, active in this thread while the stage runs."""
    import mlflow

    with (
        mlflow.start_run(run_id=parent_id, log_system_metrics=False),
        mlflow.start_run(
            run_name=stage, nested=True, tags={"gymflow.run_id": run_id, "gymflow.stage": stage}
        ) as run,
    ):
        yield run


@contextlib.contextmanager
def metrics_in_background() -> Iterator[None]:
    """While the block runs, metrics, params and tags logged through MLflow's fluent API are
    queued and written by MLflow's own background thread; flushed when the block ends.

    For training loops: TRL logs a timing metric at every profiled call (several a GRPO step)
    and each synchronous write is a sqlite transaction, ~3 % of a GRPO step on the embedded
    default (a py-spy profile of ``gymflow run``). transformers' MLflow callback already logs
    this way."""
    import mlflow

    mlflow.config.enable_async_logging(True)
    try:
        yield
    finally:
        try:
            mlflow.flush_async_logging()
        finally:
            mlflow.config.enable_async_logging(False)


def stage_runs(parent_id: str) -> dict[str, str]:
    """``{stage name: mlflow run id}`` of the nested runs under ``parent_id``."""
    import mlflow
    from mlflow import MlflowClient

    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    runs = MlflowClient().search_runs(
        [exp.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    return {r.data.tags.get("gymflow.stage", r.info.run_name): r.info.run_id for r in runs}
