"""Stage 6: held-out evaluation of candidate vs baseline (and the SFT control), then the gate."""

from __future__ import annotations

import polars as pl
from prefect import task

from gymflow.eval.gate import decide
from gymflow.eval.stats import paired_delta
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import Checkpoint, ControlComparison, GateReport, TaskData
from gymflow.tasks.evaluate import evaluate_split
from gymflow.tasks.options import STAGE_OPTIONS


def _paired(a_rows: str, b_rows: str) -> dict:
    a = pl.read_parquet(a_rows).sort("task_id")
    b = pl.read_parquet(b_rows).sort("task_id")
    return paired_delta(a["success"].cast(float).to_list(), b["success"].cast(float).to_list())


@task(name="heldout_gate", **STAGE_OPTIONS)
def heldout_gate(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    baseline: Checkpoint,
    candidate: Checkpoint,
    control: Checkpoint | None,
) -> GateReport:
    """``baseline`` is the policy GRPO started from; ``candidate`` is GRPO's final policy."""
    import mlflow

    with stage(run, "heldout_gate") as info:
        base = evaluate_split(run, cfg, data, baseline.path, "heldout", "baseline", cfg.heldout_n)
        cand = evaluate_split(run, cfg, data, candidate.path, "heldout", "candidate", cfg.heldout_n)
        delta = _paired(cand.rows, base.rows)
        comparison = None
        if control is not None:
            ctrl = evaluate_split(
                run, cfg, data, control.path, "heldout", "sft_control", cfg.heldout_n
            )
            vs_control = _paired(cand.rows, ctrl.rows)
            comparison = ControlComparison(
                summary=ctrl.summary,
                grpo_minus_control=vs_control["delta"],
                ci95=vs_control["ci95"],
            )
        report = GateReport(
            n=cand.summary["n"],
            baseline=base.summary,
            candidate=cand.summary,
            delta_success=delta["delta"],
            ci95=delta["ci95"],
            gate=decide(base.summary, cand.summary, delta, cfg.gate),
            sft_control=comparison,
            stage=info,
        )
        passed = float(report.gate.passed)
        mlflow.log_metrics({"delta_success": report.delta_success, "gate_passed": passed})
        left_out = {"stage"} if comparison else {"stage", "sft_control"}
        mlflow.log_dict(report.model_dump(mode="json", exclude=left_out), "heldout_gate.json")
    return report
