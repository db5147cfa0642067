"""Stand-alone evaluation: any policy on several environments (``gymflow eval`` as a flow).

Deploy or schedule it like the lifecycle (``evaluate.serve(cron=...)``, parameters
``{"options": {"envs": ["tool_call", "math"], "policy": "models:/gymflow-tool_call@champion"}}``):
every run evaluates, writes the report into its output folder, logs an evaluation run to the
home's MLflow store and the report as a Prefect markdown artifact (``evaluation-<eval id>``).
"""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from gymflow.eval.mlflow_run import log_evaluation
from gymflow.eval.report import write_report
from gymflow.eval.splits import GeneratedSplit
from gymflow.eval.suite import EvalOptions, run_eval
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.home import project_home
from gymflow.lifecycle.tracking import configure


@flow(name="evaluate-policy")
def evaluate(options: EvalOptions) -> dict:
    """Evaluate ``options.policy`` (and ``options.against``); the summary (``summary.json``)."""
    home = project_home()
    result = run_eval(options, home, GeneratedSplit.like(LifecycleConfig()))
    files = write_report(result)
    summary = result.summary()
    if options.mlflow:
        configure(home)
        summary["mlflow_run_id"] = log_evaluation(result, files)
    create_markdown_artifact(
        files.markdown.read_text(encoding="utf-8"),
        key=f"evaluation-{result.eval_id}".lower(),
        description=f"gymflow eval {result.eval_id}: {', '.join(result.tasks)}",
    )
    return summary
