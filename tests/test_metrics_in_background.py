"""Metrics logged in the background during training reach the MLflow store by the block's end.

Real parts: MLflow's sqlite store in a temporary home, MLflow's own async logging queue.
"""

from __future__ import annotations

import os


def test_every_metric_logged_in_the_block_is_in_the_store_when_it_ends(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient
    from mlflow.environment_variables import MLFLOW_ENABLE_ASYNC_LOGGING

    from gymflow.lifecycle.tracking import configure, metrics_in_background

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # configure sets them: undone after
    configure(tmp_path)
    with mlflow.start_run() as run:
        with metrics_in_background():
            assert MLFLOW_ENABLE_ASYNC_LOGGING.get()
            for step in range(60):
                mlflow.log_metrics({"loss": 1.0 / (step + 1), "step_s": 0.5}, step=step)
            mlflow.log_metric("chosen_step", 40)
        assert not MLFLOW_ENABLE_ASYNC_LOGGING.get()  # later stages log as before
        history = MlflowClient().get_metric_history(run.info.run_id, "loss")
        assert sorted(m.step for m in history) == list(range(60))
        assert MlflowClient().get_run(run.info.run_id).data.metrics["chosen_step"] == 40
