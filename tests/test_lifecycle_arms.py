"""Is RL worth it here: a smoke lifecycle with both controls (``controls=["sft", "rft"]``) on a
real Prefect engine and MLflow store. The RFT control trains after GRPO for GRPO's wall time,
the gate judges the three arms, and the verdict and pass@k reach the summary, the report, the
terminal table and the registered version's tags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext

VERDICTS = {"rl_pays", "cheaper_suffices", "undecided"}


@pytest.fixture(scope="module")
def arms_run(gym_home, prefect_engine, tmp_path_factory):
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.tracking import parent_run_id

    run_id = "arms-smoke"
    run_dir = tmp_path_factory.mktemp("runs") / run_id
    ctx = RunContext(
        run_id=run_id, run_dir=str(run_dir), home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )  # fmt: skip
    cfg = LifecycleConfig.smoke().overridden(
        {"controls": ["sft", "rft"], "registered_model": "gymflow-arms-test",
         "gate": {"pass_k": 4, "pass_k_tasks": 8}}
    )  # fmt: skip
    return ctx, cfg, lifecycle(ctx, cfg)


def test_the_rft_control_trains_in_grpos_time_and_is_a_candidate(arms_run):
    ctx, _, summary = arms_run
    assert "rft_control" in summary["stages"]
    rft = summary["rft_control"]
    assert rft["budget_s"] == pytest.approx(summary["grpo"]["train_wall_s"])
    c = rft["compute"]
    assert c["samples_generated"] >= c["examples_trained"] >= 0 and rft["steps"] >= 1
    assert {v["candidate"] for v in summary["gate"]["verdicts"]} == {
        "grpo", "sft_control", "rft_control"
    }  # fmt: skip
    assert set(summary["gate"]["between"]) == {"grpo − rft_control", "rft_control − sft_control"}
    assert (Path(ctx.run_dir) / "eval" / "heldout-rft_control.parquet").exists()


def test_the_verdict_and_pass_at_k_are_reported_everywhere(arms_run):
    from gymflow.lifecycle.summary import render_table

    ctx, _, summary = arms_run
    verdict = summary["verdict"]
    assert verdict["verdict"] in VERDICTS and verdict["margin"] == 0.05
    assert [e["control"] for e in verdict["evidence"]] == ["sft_control", "rft_control"]
    assert set(summary["pass_at_k"]) == {"baseline", "grpo", "sft_control", "rft_control"}
    for by_env in summary["pass_at_k"].values():
        (figures,) = by_env.values()
        assert figures["k"] == 4 and figures["n_tasks"] == 8
        assert figures["pass_at"]["4"]["value"] >= figures["pass_at"]["1"]["value"]
    table = render_table(summary)
    assert f"RL verdict: {verdict['verdict']} — " in table and "greedy pass@1 / pass@4" in table
    report = (Path(ctx.run_dir) / "report.md").read_text()
    assert f"RL verdict: {verdict['verdict']}" in report and "pass@4" in report
    saved = json.loads((Path(ctx.run_dir) / "summary.json").read_text())
    assert saved["verdict"] == verdict


def test_the_registered_version_carries_the_verdict(arms_run):
    from mlflow import MlflowClient

    _, _, summary = arms_run
    reg = summary["registry"]
    version = MlflowClient().get_model_version(reg["model"], reg["version"])
    assert version.tags["gymflow.rl_verdict"] == summary["verdict"]["verdict"]
    assert version.tags["gymflow.rl_verdict.reason"] == summary["verdict"]["sentence"]
