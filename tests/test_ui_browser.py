"""Both UIs in a real browser after a ``gymflow run --smoke``: Debian's chromium, headless.

The run is a real ``gymflow run --smoke`` in a temporary project home; ``gymflow ui`` then
serves that home's Prefect database and MLflow store. The Prefect and MLflow APIs say where
to look (ids), the browser says what a person sees there: each page is rendered by chromium
(``--dump-dom`` after the page's scripts ran) and screenshotted into the test's temporary
folder. A smoke model does not beat its start, so its gate does not pass; the test then
promotes the registered version by hand (``gymflow promote --force``), as an operator would,
to see the ``champion`` alias in the registry page.

Skipped when chromium is missing (``make setup`` installs it as root with apt, best effort).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from ui_process import GYMFLOW, UIProcess, api

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (make setup installs it with apt as root)"
)
RUN_ID = "browser-smoke"
STAGES = [
    "generate_tasks", "resolve_policy", "profile_verifier", "baseline_eval", "sft", "grpo",
    "sft_control", "heldout_gate", "promote",
]  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A finished smoke run, its registered version made champion, and both UIs serving it."""
    home = tmp_path_factory.mktemp("uihome")
    env = os.environ | {"GYMFLOW_HOME": str(home)}
    env.pop("GYMFLOW_FAIL_AT", None)
    for name in [n for n in env if n.startswith(("PREFECT_", "MLFLOW_"))]:
        del env[name]  # the stores this pytest process points at: the run and UI use the home's
    run = subprocess.run(
        [GYMFLOW, "run", "--smoke", "--run-id", RUN_ID], env=env, capture_output=True,
        text=True, timeout=1500,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((home / "runs" / RUN_ID / "summary.json").read_text())
    if not summary["registry"]["champion_alias_moved"]:
        version = summary["registry"]["version"]
        promoted = subprocess.run(
            [GYMFLOW, "promote", version, "--force", "--reason", "browser test"], env=env,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert promoted.returncode == 0, promoted.stderr
    shots = tmp_path_factory.mktemp("screenshots")
    with UIProcess(home, env) as ui:
        yield ui, summary, run.stdout, shots


def _browser(url: str, shots: Path, name: str) -> str:
    """What chromium shows at ``url``: the DOM after the page's scripts ran; also saves
    ``<name>.png`` (1400×900) under ``shots``."""
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
              "--virtual-time-budget=20000", f"--user-data-dir={shots / '.profile'}"]  # fmt: skip
    subprocess.run(
        [*common, f"--screenshot={shots / (name + '.png')}", url], capture_output=True, timeout=120
    )
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert (shots / f"{name}.png").stat().st_size > 10_000, f"no screenshot of {url}"
    return dom.stdout


def _flow_run(ui) -> dict:
    runs = api(f"{ui.prefect}/api/flow_runs/filter", {"flow_runs": {"name": {"any_": [RUN_ID]}}})
    assert len(runs) == 1, f"one flow run named {RUN_ID} expected, found {len(runs)}"
    return runs[0]


def test_run_prints_both_ui_addresses(served):
    _, summary, stdout, _ = served
    assert f"Prefect flow run: {summary['links']['prefect']}" in stdout
    assert f"MLflow run: {summary['links']['mlflow']}" in stdout


def test_prefect_flow_run_is_named_by_run_id_with_every_stage(served):
    ui, _, _, shots = served
    flow_run = _flow_run(ui)
    assert flow_run["state_type"] == "COMPLETED"
    page = _browser(f"{ui.prefect}/runs/flow-run/{flow_run['id']}", shots, "prefect-flow-run")
    assert RUN_ID in page and "Completed" in page and "rlvr-lifecycle" in page
    tasks = api(
        f"{ui.prefect}/api/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run["id"]]}}}
    )
    by_stage = {t["name"].rsplit("-", 1)[0]: t for t in tasks}
    assert set(STAGES) <= set(by_stage), f"stages missing: {set(STAGES) - set(by_stage)}"
    for stage in STAGES:
        task = by_stage[stage]
        assert task["state_type"] == "COMPLETED", stage
        page = _browser(f"{ui.prefect}/runs/task-run/{task['id']}", shots, f"prefect-{stage}")
        assert task["name"] in page and "Completed" in page, f"{stage}'s page"


def test_every_stage_has_an_artifact_and_the_run_links_to_mlflow(served):
    ui, summary, _, shots = served
    flow_run = _flow_run(ui)
    artifacts = api(
        f"{ui.prefect}/api/artifacts/filter",
        {"artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}},
    )
    by_key = {a["key"]: a for a in artifacts}
    for stage in STAGES:
        assert f"stage-{stage.replace('_', '-')}" in by_key, f"{stage} left no artifact"
    assert summary["mlflow_run_id"] in by_key["mlflow-run"]["data"]  # the link back to MLflow
    assert "Gate:" in by_key["run-report"]["data"]
    page = _browser(
        f"{ui.prefect}/artifacts/artifact/{by_key['stage-grpo']['id']}", shots, "prefect-artifact"
    )
    assert f"grpo: key figures of run {RUN_ID}" in page
    assert "rollouts/reward_mean" in page and "MLflow stage run" in page


def test_mlflow_parent_run_carries_the_prefect_link_and_plots(served):
    ui, summary, _, shots = served
    flow_run = _flow_run(ui)
    parent = api(f"{ui.mlflow}/api/2.0/mlflow/runs/get?run_id={summary['mlflow_run_id']}")["run"]
    tags = {t["key"]: t["value"] for t in parent["data"]["tags"]}
    assert tags["prefect.flow_run_id"] == flow_run["id"]
    assert tags["prefect.flow_run_url"].endswith(f"/runs/flow-run/{flow_run['id']}")
    assert "GRPO candidate" in tags["mlflow.note.content"]  # the summary table
    params = {p["key"] for p in parent["data"]["params"]}
    assert {"grpo.learning_rate", "sft.max_steps", "gate.max_unsafe_increase"} <= params
    experiment = parent["info"]["experiment_id"]
    base = f"{ui.mlflow}/#/experiments/{experiment}/runs/{summary['mlflow_run_id']}"
    page = _browser(f"{base}?workflowType=machine_learning", shots, "mlflow-run")
    assert f"lifecycle-{RUN_ID}" in page and flow_run["id"] in page
    plot = "plots/heldout_success.png"
    page = _browser(f"{base}/artifacts/{plot}?workflowType=machine_learning", shots, "mlflow-plot")
    assert f'<img alt="{plot}"' in page
    page = _browser(
        f"{ui.mlflow}/#/experiments/{experiment}?workflowType=machine_learning",
        shots,
        "mlflow-experiment",
    )
    assert f"lifecycle-{RUN_ID}" in page and "gymflow lifecycle runs" in page


def test_registered_model_with_its_champion_alias(served):
    ui, summary, _, shots = served
    name = summary["registry"]["model"]
    model = api(
        f"{ui.mlflow}/api/2.0/mlflow/registered-models/get?name={urllib.parse.quote(name)}"
    )["registered_model"]
    aliases = {a["alias"]: a["version"] for a in model["aliases"]}
    assert aliases["champion"] == summary["registry"]["version"]
    page = _browser(f"{ui.mlflow}/#/models/{name}", shots, "mlflow-model")
    assert name in page and "champion" in page and "alias_history" in page
