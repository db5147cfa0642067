"""``gymflow deploy`` against a real Prefect server (``gymflow ui``), end to end.

A smoke-budget lifecycle deployment with a cron schedule and typed parameters is registered and
served. Run 1 is triggered through the API and fails in SFT right after its step-15
checkpoint, then (retried) in GRPO right after its step-2 checkpoint
(``GYMFLOW_FAIL_AT=sft@step15,grpo@step1``, each once). It is retried through the API exactly
as the Prefect UI's Retry button does (state ``AwaitingRetry``) and completes in the same run
folder: every other stage ran once (a retry takes finished stages from Prefect's cache), and
each retried trainer resumed from its checkpoint (its MLflow stage run logs only the steps
after it). Run 2, triggered with nothing new (same data, champion, config and code), ends
without running a stage and names run 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from ui_process import GYMFLOW, UIProcess, api

from gymflow.deployments.lifecycle import scheduled_run_id

STAGES = [
    "generate_tasks", "resolve_policy", "profile_verifier", "baseline_eval", "sft", "grpo",
    "sft_control", "heldout_gate", "promote",
]  # fmt: skip
TRAINING = {"sft", "grpo", "sft_control"}


def _wait(ui, flow_run_id: str, timeout_s: float = 1200) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = api(f"{ui.prefect}/api/flow_runs/{flow_run_id}")
        if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        time.sleep(2)
    raise AssertionError(f"flow run {flow_run_id} still {run['state_name']} after {timeout_s} s")


def _stage_runs(ui, run_id: str) -> dict[str, list[str]]:
    """``{stage: [status, ...]}`` (sorted) of the MLflow stage runs of lifecycle run ``run_id``."""
    return {stage: sorted(r["status"] for r in runs) for stage, runs in _runs(ui, run_id).items()}


def _runs(ui, run_id: str) -> dict[str, list[dict]]:
    """``{stage: [run info + params, ...]}`` of the MLflow stage runs of ``run_id``."""
    found = api(
        f"{ui.mlflow}/api/2.0/mlflow/runs/search",
        {
            "experiment_ids": ["1"],
            "filter": f"tags.`gymflow.run_id` = '{run_id}'",
            "max_results": 500,
        },
    ).get("runs", [])
    out: dict[str, list[str]] = {}
    for run in found:
        tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
        params = {p["key"]: p["value"] for p in run["data"].get("params", [])}
        if "gymflow.stage" in tags:
            out.setdefault(tags["gymflow.stage"], []).append(run["info"] | {"params": params})
    return out


def _steps(ui, mlflow_run_id: str, metric: str) -> list[int]:
    url = (
        f"{ui.mlflow}/api/2.0/mlflow/metrics/get-history?run_id={mlflow_run_id}&metric_key={metric}"
    )
    return sorted(m["step"] for m in api(url).get("metrics", []))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("deployhome")
    with UIProcess(home) as ui:
        env = os.environ | {"GYMFLOW_HOME": str(home), "GYMFLOW_FAIL_AT": "sft@step15,grpo@step1"}
        log = (home / "deploy.log").open("w")
        deploy = subprocess.Popen(
            [GYMFLOW, "deploy", "--smoke", "--cron", "0 3 * * *", "--eval-cron", ""],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 180
            while True:
                found = api(f"{ui.prefect}/api/deployments/filter", {})
                names = {d["name"]: d for d in found}
                if "nightly" in names and "champion-eval" in names:
                    break
                assert deploy.poll() is None, (home / "deploy.log").read_text()
                assert time.monotonic() < deadline, "deployments not registered in 180 s"
                time.sleep(1)
            yield ui, home, names
        finally:
            deploy.terminate()
            deploy.wait(timeout=60)


def test_deployments_are_registered_with_cron_and_typed_parameters(served):
    _, _, deployments = served
    nightly = deployments["nightly"]
    assert [s["schedule"]["cron"] for s in nightly["schedules"]] == ["0 3 * * *"]
    schema = nightly["parameter_openapi_schema"]
    config = schema["definitions"]["LifecycleConfig"]["properties"]
    assert {"grpo", "sft", "gate", "n_tasks", "seed"} <= set(config)  # a form, not a dict
    assert nightly["parameters"]["config"]["grpo"]["max_steps"] == 3  # the smoke budget
    evaluation = deployments["champion-eval"]
    assert evaluation["parameters"]["options"]["policy"] == "models:/gymflow-tool_call@champion"


def test_runs_the_scheduler_creates_in_one_batch_get_their_own_run_ids(served):
    """Prefect's scheduler inserts a deployment's next runs in one batch; their UUIDv7 ids share
    the creation millisecond (the first 48 bits), so a run id made of a prefix was shared and a
    nightly run silently reused an earlier night's folder and cached stages."""
    ui, _, deployments = served
    nightly = deployments["nightly"]["id"]
    query = {"flow_runs": {"deployment_id": {"any_": [nightly]}, "state": {"type": {"any_": ["SCHEDULED"]}}}}  # fmt: skip
    deadline = time.monotonic() + 120
    while len(batch := api(f"{ui.prefect}/api/flow_runs/filter", query)) < 2:
        assert time.monotonic() < deadline, f"the scheduler created {len(batch)} runs in 120 s"
        time.sleep(2)
    ids = [run["id"] for run in batch]
    assert len({scheduled_run_id(i) for i in ids}) == len(ids), ids
    shared = len(ids) - len({i[:13] for i in ids})
    print(f"{len(ids)} scheduled runs, {shared} sharing a 13-character prefix with another")


def _retry(ui, flow_run_id: str) -> dict:
    """What the Prefect UI's Retry button does to a failed flow run; its next end state."""
    retry = {"state": {"type": "SCHEDULED", "name": "AwaitingRetry", "message": "Retry from the UI"}, "force": False}  # fmt: skip
    api(f"{ui.prefect}/api/flow_runs/{flow_run_id}/set_state", retry)
    return _wait(ui, flow_run_id)


def test_failed_run_retried_like_the_ui_then_nothing_new_is_skipped(served):
    ui, home, deployments = served
    nightly = deployments["nightly"]["id"]
    first = api(f"{ui.prefect}/api/deployments/{nightly}/create_flow_run", {})
    failed = _wait(ui, first["id"])
    assert failed["state_type"] == "FAILED", failed["state"]
    run_id = scheduled_run_id(first["id"])
    assert failed["name"] == run_id, "the flow run is named after its run id"
    run_dir = home / "runs" / run_id
    assert (run_dir / ".injected-failure-sft@step15").exists()
    assert (run_dir / "sft" / "trainer" / "checkpoint-15").is_dir(), "failed after its checkpoint"
    before = _stage_runs(ui, run_id)
    assert set(before) >= {"generate_tasks", "resolve_policy", "profile_verifier"}
    assert before["sft"] == ["FAILED"] and "grpo" not in before

    failed = _retry(ui, first["id"])
    assert failed["state_type"] == "FAILED", failed["state"]
    assert (run_dir / ".injected-failure-grpo@step1").exists()
    assert not (run_dir / "summary.json").exists()
    assert (run_dir / "grpo" / "trainer" / "checkpoint-2").is_dir(), "failed after its checkpoint"
    before = _stage_runs(ui, run_id)
    assert before["sft"] == ["FAILED", "FINISHED"] and before["grpo"] == ["FAILED"]
    assert "heldout_gate" not in before

    done = _retry(ui, first["id"])
    assert done["state_type"] == "COMPLETED", done["state"]
    assert (run_dir / "summary.json").exists(), "the retry finished in the same run folder"
    after = _stage_runs(ui, run_id)
    for stage in STAGES:
        if stage == "sft_control":
            continue  # ran beside GRPO: it stopped when GRPO failed, and ran again
        expected = ["FAILED", "FINISHED"] if stage in ("sft", "grpo") else ["FINISHED"]
        assert after.get(stage) == expected, f"{stage}: {after.get(stage)}"
    runs = {stage: {r["status"]: r for r in _runs(ui, run_id)[stage]} for stage in ("sft", "grpo")}
    # each retried trainer started at its checkpoint's step: SFT evaluated (and saved) at
    # step 15 before it failed, and at step 30 (the smoke budget's last) after it resumed
    sft = runs["sft"]
    assert sft["FINISHED"]["params"]["resumed_from"].endswith("sft/trainer/checkpoint-15")
    assert _steps(ui, sft["FAILED"]["run_id"], "sft/val_sampled_success") == [15]
    assert _steps(ui, sft["FINISHED"]["run_id"], "sft/val_sampled_success") == [30]
    # GRPO's rollouts of steps 0-1 came from the failed attempt, of step 2 from the retry
    grpo = runs["grpo"]
    assert grpo["FINISHED"]["params"]["resumed_from"].endswith("grpo/trainer/checkpoint-2")
    assert _steps(ui, grpo["FAILED"]["run_id"], "rollouts/reward_mean") == [0, 1]
    assert _steps(ui, grpo["FINISHED"]["run_id"], "rollouts/reward_mean") == [2]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["sft"]["steps"], summary["grpo"]["steps"]) == (30, 3)

    second = api(f"{ui.prefect}/api/deployments/{nightly}/create_flow_run", {})
    started = time.monotonic()
    skipped = _wait(ui, second["id"])
    assert skipped["state_type"] == "COMPLETED", skipped["state"]
    assert not _stage_runs(ui, scheduled_run_id(second["id"])), "a stage ran though nothing changed"
    artifacts = api(
        f"{ui.prefect}/api/artifacts/filter",
        {"artifacts": {"flow_run_id": {"any_": [second["id"]]}}},
    )
    note = next(a["data"] for a in artifacts if a["key"] == "lifecycle-skipped")
    assert f"nothing new since run {run_id}" in note
    print(f"skipped run took {time.monotonic() - started:.1f} s from trigger to completed")
