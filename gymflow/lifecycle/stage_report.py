"""Each stage's key figures in the Prefect UI: a markdown artifact and one log line per figure.

The figures are what the stage logged to its MLflow run (metrics at their last step, params,
the gate's tags), so every stage is covered without code of its own, and the artifact links to
the stage's MLflow run. Outside a Prefect task run (a library call, a unit test) nothing is
published.
"""

from __future__ import annotations

import re
from pathlib import Path

from gymflow.lifecycle.prefect_artifacts import markdown_artifact
from gymflow.lifecycle.ui_links import mlflow_run_url

MAX_LOG_LINES = 40
MAX_PARAMS = 30
_SHOWN_TAGS = ("gate.chosen", "gate.reason", "gymflow.candidate")


def stage_figures(mlflow_run_id: str) -> list[tuple[str, str]]:
    """``(name, value)``: the stage run's metrics, then its gate tags, then its params (left
    out when a trainer logged its whole argument list: more than ``MAX_PARAMS``)."""
    from mlflow import MlflowClient

    data = MlflowClient().get_run(mlflow_run_id).data
    figures = sorted((k, _number(v)) for k, v in data.metrics.items())
    figures += [(k, data.tags[k]) for k in _SHOWN_TAGS if k in data.tags]
    if len(data.params) <= MAX_PARAMS:
        figures += sorted((k, str(v)) for k, v in data.params.items())
    else:
        figures.append(("params", f"{len(data.params)} (trainer arguments) in MLflow"))
    return figures


def publish_stage(home: str, stage: str, run_id: str, mlflow_run_id: str, wall_s: float) -> None:
    """The stage's markdown artifact (key ``stage-<name>``) and log lines, in Prefect."""
    from prefect.context import TaskRunContext

    if TaskRunContext.get() is None:
        return
    import mlflow
    from prefect.logging import get_run_logger

    figures = stage_figures(mlflow_run_id)
    experiment = mlflow.get_run(mlflow_run_id).info.experiment_id
    url = mlflow_run_url(Path(home), experiment, mlflow_run_id)
    rows = "\n".join(f"| `{k}` | {_cell(v)} |" for k, v in figures)
    markdown = (
        f"## {stage} — run `{run_id}`\n\nWall time {wall_s:.1f} s. "
        f"[MLflow stage run]({url})\n\n| figure | value |\n|---|---|\n{rows}\n"
    )
    markdown_artifact(markdown, f"stage-{_key(stage)}", f"{stage}: key figures of run {run_id}")
    logger = get_run_logger()
    logger.info("%s: %d figures, %.1f s; MLflow %s", stage, len(figures), wall_s, url)
    for name, value in figures[:MAX_LOG_LINES]:
        logger.info("%s · %s = %s", stage, name, value)
    if len(figures) > MAX_LOG_LINES:
        logger.info("%s · … %d more in MLflow", stage, len(figures) - MAX_LOG_LINES)


def _number(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")[:300]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
