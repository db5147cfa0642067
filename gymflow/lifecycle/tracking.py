"""MLflow helpers: the store a home tracks into, one parent run per lifecycle run, nested stages.

The store is a team's tracking server when the user (or the run config) names one, else the
home's own (:mod:`gymflow.core.tracking_store`). MLflow 3 refuses a plain ``file:`` store, so
the home's tracking and registry live in ``sqlite:///<home>/mlruns/mlflow.db`` with artifacts
under ``<home>/mlruns/artifacts``; a server keeps the artifacts in its own store, reached
through it (``mlflow-artifacts:``), so a machine without a shared disk logs and downloads
checkpoints, Parquet, reports and registered models through the server alone.
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


SERVER_RETRIES = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "10",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "2",
}
"""MLflow's client against a server retries each request this many times, the wait doubling
from 2 s up to urllib3's 120 s cap: about eight minutes before a stage gives up, against
MLflow's default of seven tries (about two minutes of waits while a restarting server is
down, fewer when a database restart spent some on 5xx answers)."""


def configure(home: Path, uri: str | None = None, registry_uri: str | None = None) -> str:
    """Point MLflow at the home's store, or at ``uri`` / the user's ``MLFLOW_TRACKING_URI``
    (:func:`gymflow.core.tracking_store.tracking_store`), with environment variables so TRL's
    callback and child processes agree. A server is checked first
    (:func:`gymflow.core.tracking_server.check_tracking_server`): one line with a kind when it
    does not answer, refuses the login or runs another MLflow version."""
    from gymflow.core.tracking_server import check_tracking_server
    from gymflow.core.tracking_store import HOME_STORE_VAR, tracking_store

    store = tracking_store(home, uri, registry_uri)
    mlruns = (home / "mlruns").resolve()
    if store.home_store:
        mlruns.mkdir(parents=True, exist_ok=True)
        os.environ[HOME_STORE_VAR] = store.tracking_uri
    elif store.server:
        check_tracking_server(store.tracking_uri)
        for key, value in SERVER_RETRIES.items():  # the user's own settings win
            os.environ.setdefault(key, value)
    os.environ["MLFLOW_TRACKING_URI"] = store.tracking_uri
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ["MLFLOW_EXPERIMENT_NAME"] = EXPERIMENT
    import mlflow

    mlflow.set_tracking_uri(store.tracking_uri)
    mlflow.set_registry_uri(store.registry_uri)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        # a server puts artifacts in its own store (mlflow-artifacts:); any other store, here
        where = None if store.server else (mlruns / "artifacts").as_uri()
        mlflow.create_experiment(EXPERIMENT, artifact_location=where, tags=EXPERIMENT_TAGS)
    elif any(experiment.tags.get(k) != v for k, v in EXPERIMENT_TAGS.items()):
        for key, value in EXPERIMENT_TAGS.items():  # a store made before these tags existed
            mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id, key, value)
    mlflow.set_experiment(EXPERIMENT)
    return store.tracking_uri


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
