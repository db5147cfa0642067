"""Link a lifecycle run's Prefect flow run and its MLflow parent run, both ways.

The MLflow parent run gets the flow run's id, name and UI address as tags; the Prefect flow run
gets a link artifact to the MLflow run. A resumed run is a new flow run: the tags then name the
latest one, and ``prefect.flow_run_ids`` lists every flow run that worked on the run.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.ui_links import mlflow_run_url, prefect_flow_run_url


def run_links(run: RunContext, flow_run_id: str | None) -> dict[str, str]:
    """``{"mlflow": url}`` plus ``"prefect"`` when there is a flow run."""
    import mlflow

    experiment = mlflow.get_run(run.mlflow_parent_id).info.experiment_id
    links = {"mlflow": mlflow_run_url(Path(run.home), experiment, run.mlflow_parent_id)}
    if flow_run_id:
        links["prefect"] = prefect_flow_run_url(Path(run.home), flow_run_id)
    return links


def link_flow_run(run: RunContext) -> dict[str, str]:
    """Called inside the flow: tag the MLflow parent run with this flow run, and give the flow
    run a link artifact to the MLflow parent run. Returns both addresses."""
    from mlflow import MlflowClient
    from prefect.runtime import flow_run

    flow_run_id = flow_run.get_id()
    links = run_links(run, flow_run_id)
    if flow_run_id is None:  # called outside a flow run (a library call)
        return links
    client = MlflowClient()
    tags = client.get_run(run.mlflow_parent_id).data.tags
    earlier = [i for i in tags.get("prefect.flow_run_ids", "").split(",") if i]
    for key, value in {
        "prefect.flow_run_id": flow_run_id,
        "prefect.flow_run_name": flow_run.get_name() or "",
        "prefect.flow_run_url": links["prefect"],
        "prefect.flow_run_ids": ",".join([*earlier, flow_run_id]),
    }.items():
        client.set_tag(run.mlflow_parent_id, key, value)
    from prefect.artifacts import create_link_artifact

    create_link_artifact(
        links["mlflow"],
        link_text=f"MLflow parent run of {run.run_id}",
        key="mlflow-run",
        description=f"The MLflow run of lifecycle run `{run.run_id}`: config, stages, plots.",
    )
    return links
