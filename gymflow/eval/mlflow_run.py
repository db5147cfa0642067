"""An evaluation as an MLflow run of the experiment already configured (the home's store).

The run is named ``eval-<eval id>`` and tagged ``gymflow.kind = evaluation`` with the policy
specs; it holds the options as params, every figure as a metric (``<label>/<env>/<name>``,
``overall`` for the pooled one; with ``--against``, ``paired/<env>/delta_<name>``), the task
sets as MLflow dataset inputs (context ``eval``), and the report folder and the episodes'
Parquet as artifacts. When a policy is a registry version (``models:/``), the run is linked to
it: its metrics are also logged against the version's logged model (MLflow 3 shows them on the
model's page) and the version gets tags ``gymflow.eval.<split>.<env>.success`` and
``gymflow.eval.last_run``.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.data.task_table import tasks_frame
from gymflow.eval.report import ReportFiles
from gymflow.eval.suite import EvalResult, PolicyEval
from gymflow.rollout.store import ROLLOUTS_DIR

FIGURES = ("success", "reward", "well_formed", "unsafe_rate", "turns", "tokens", "latency_p50",
           "latency_p95")  # fmt: skip


def log_evaluation(result: EvalResult, files: ReportFiles) -> str:
    """Log ``result`` as a new MLflow run; returns its id."""
    import mlflow

    o = result.options
    tags = {
        "gymflow.kind": "evaluation",
        "gymflow.eval_id": result.eval_id,
        **{f"gymflow.{p.label}": p.lineage_spec for p in result.policies},
    }
    with mlflow.start_run(run_name=f"eval-{result.eval_id}", tags=tags) as run:
        mlflow.log_params(
            {
                **{k: str(v)[:500] for k, v in o.model_dump(mode="json").items()},
                **{f"source.{env}": src for env, src in result.sources.items()},
            }
        )
        for env, tasks in result.tasks.items():
            dataset = mlflow.data.from_polars(
                tasks_frame(tasks), source=str(result.out / "tasks.parquet"), name=f"{env}-eval"
            )
            mlflow.log_input(dataset, context="eval")
        for p in result.policies:
            mlflow.log_metrics(policy_metrics(p))
            if p.registered is not None:
                _link_version(p, result, run.info.run_id)
        if result.comparison:
            mlflow.log_metrics(
                {
                    f"paired/{env}/delta_{name}": d["delta"]
                    for env, ds in result.comparison.items()
                    for name, d in ds.items()
                    if d is not None
                }
            )
        mlflow.log_artifacts(str(files.folder), artifact_path="report")
        for p in result.policies:
            where = "episodes" if p.label == "policy" else f"episodes-{p.label}"
            mlflow.log_artifacts(str(p.folder / ROLLOUTS_DIR), artifact_path=where)
            mlflow.log_artifact(str(p.folder / "tasks.parquet"), artifact_path=where)
        return run.info.run_id


def log_failed_evaluation(options, error) -> str:
    """An evaluation that could not measure its policy (its policy server down, say), as a
    FAILED MLflow run with the options and the error: the attempt is on record, with no
    figures that could pass for a score. Returns the run's id."""
    import mlflow

    tags = {
        "gymflow.kind": "evaluation",
        "gymflow.error_kind": str(error.kind),
        "gymflow.error": error.detail[:5000],
    }
    with mlflow.start_run(run_name="eval-failed", tags=tags) as run:
        mlflow.log_params({k: str(v)[:500] for k, v in options.model_dump(mode="json").items()})
        mlflow.end_run("FAILED")
        return run.info.run_id


def policy_metrics(p: PolicyEval, prefix: bool = True) -> dict[str, float]:
    """The flat figures of one policy (``<label>/<env>/<name>``; without the label if not
    ``prefix``): rates and means, their CI bounds, pass@k."""
    out: dict[str, float] = {}
    for env, m in [*p.per_env.items(), ("overall", p.overall)]:
        head = f"{p.label}/{env}" if prefix else env
        for name in FIGURES:
            out[f"{head}/{name}"] = float(m[name])
        for name in ("success", "reward"):
            out[f"{head}/{name}_ci95_lo"], out[f"{head}/{name}_ci95_hi"] = m[f"{name}_ci95"]
        for k, v in m["pass_at"].items():
            out[f"{head}/pass_at_{k}"] = v["value"]
        for name in ("right_tool", "arg_accuracy", "tool_execution"):
            if m[name] is not None:
                out[f"{head}/{name}"] = m[name]["value"]
        if m["usage"] and m["usage"]["cost_usd"] is not None:
            out[f"{head}/cost_usd"] = m["usage"]["cost_usd"]
    return out


def _link_version(p: PolicyEval, result: EvalResult, run_id: str) -> None:
    import mlflow
    from mlflow import MlflowClient

    reg = p.registered
    if reg.model_id:
        mlflow.log_metrics(policy_metrics(p, prefix=False), model_id=reg.model_id)
    client = MlflowClient()
    split = (
        result.options.split if "/" not in result.options.split else Path(result.options.split).stem
    )
    for env, m in p.per_env.items():
        lo, hi = m["success_ci95"]
        client.set_model_version_tag(
            reg.name, reg.version, f"gymflow.eval.{split}.{env}.success",
            f"{m['success']:.3f} [{lo:.3f}, {hi:.3f}] n={m['n']} (eval {result.eval_id})",
        )  # fmt: skip
    client.set_model_version_tag(reg.name, reg.version, "gymflow.eval.last_run", run_id)
