"""The evaluation as a Prefect flow on a real Prefect engine: the same evaluation as the command,
an MLflow evaluation run, and the report as a Prefect markdown artifact."""

from __future__ import annotations

from pathlib import Path

from gymflow.eval.suite import EvalOptions

REPO = Path(__file__).resolve().parents[1]


def test_flow_evaluates_logs_and_leaves_a_markdown_artifact(gym_home, prefect_engine, tmp_path):
    from mlflow import MlflowClient
    from prefect.artifacts import Artifact

    from gymflow.flows.evaluate import evaluate

    options = EvalOptions(
        envs=["counter"],
        policy="scripted:counter",
        split=str(REPO / "environments/counter/examples/nemo_gym_tasks.jsonl"),
        fmt="nemo_gym",
        out=tmp_path / "flow-eval",
    )
    summary = evaluate(options)
    overall = summary["policies"][0]["overall"]
    assert overall["success"] == 1.0 and overall["n"] == 5
    run = MlflowClient().get_run(summary["mlflow_run_id"])
    assert run.data.tags["gymflow.eval_id"] == summary["eval_id"]
    assert run.data.metrics["policy/counter/success"] == 1.0
    artifact = Artifact.get(f"evaluation-{summary['eval_id']}")
    assert artifact is not None and artifact.type == "markdown"
    assert f"# Evaluation {summary['eval_id']}" in artifact.data
    assert "| counter | 5×1 | 1.000 [" in artifact.data
