"""Where the project's two UIs are, and the address of a run in each.

``gymflow ui`` writes the addresses it serves on to ``<home>/.ui.json``; runs started later
link to those. A team's MLflow server (``MLFLOW_TRACKING_URI`` of http(s)) is its own UI.
``GYMFLOW_PREFECT_UI`` / ``GYMFLOW_MLFLOW_UI`` override them; otherwise the defaults of
``gymflow ui`` (Prefect on 127.0.0.1:4200, MLflow on 127.0.0.1:5000).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from gymflow.core.tracking_store import SERVER_SCHEMES, without_login

UI_FILE = ".ui.json"
DEFAULTS = {"prefect": "http://127.0.0.1:4200", "mlflow": "http://127.0.0.1:5000"}
ML_MODE = "workflowType=machine_learning"
"""MLflow 3.17's UI picks its mode (GenAI / model training) from this query parameter or the
browser's last choice, not from the experiment's ``mlflow.experimentKind`` tag."""


def ui_addresses(home: Path) -> dict[str, str]:
    """``{"prefect": url, "mlflow": url}`` for the project at ``home``."""
    found = dict(DEFAULTS)
    with contextlib.suppress(OSError, ValueError):  # no `gymflow ui` yet: the defaults
        found |= json.loads((home / UI_FILE).read_text())
    tracking = os.environ.get("MLFLOW_TRACKING_URI", "")
    if urlsplit(tracking).scheme in SERVER_SCHEMES:
        found["mlflow"] = without_login(tracking)
    for key in DEFAULTS:
        found[key] = os.environ.get(f"GYMFLOW_{key.upper()}_UI", found[key]).rstrip("/")
    return found


def write_ui_addresses(home: Path, prefect: str, mlflow: str) -> None:
    (home / UI_FILE).write_text(json.dumps({"prefect": prefect, "mlflow": mlflow}))


def prefect_flow_run_url(home: Path, flow_run_id: str) -> str:
    return f"{ui_addresses(home)['prefect']}/runs/flow-run/{flow_run_id}"


def mlflow_experiment_url(home: Path, experiment_id: str) -> str:
    """The experiment's runs table (MLflow's UI opens in its GenAI mode unless told)."""
    return f"{ui_addresses(home)['mlflow']}/#/experiments/{experiment_id}?{ML_MODE}"


def mlflow_run_url(home: Path, experiment_id: str, run_id: str) -> str:
    return f"{ui_addresses(home)['mlflow']}/#/experiments/{experiment_id}/runs/{run_id}?{ML_MODE}"


def mlflow_model_url(home: Path, name: str, version: str | None = None) -> str:
    base = f"{ui_addresses(home)['mlflow']}/#/models/{name}"
    return f"{base}/versions/{version}" if version else base
