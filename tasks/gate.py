"""Stage 6: held-out evaluation of the start and the candidates (GRPO, the SFT control), then
the gate: the best candidate is promoted only if it beats the start significantly."""

from __future__ import annotations

import polars as pl
from prefect import task

from gymflow.eval.gate import Candidate, choose
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
    """``baseline`` is the policy GRPO started from; ``candidate`` is GRPO's final policy;
    ``control`` the SFT control (when it ran): both are candidates for promotion."""
    import mlflow

    with stage(run, "heldout_gate") as info:
        base = evaluate_split(run, cfg, data, baseline.path, "heldout", "baseline", cfg.heldout_n)
        cand = evaluate_split(run, cfg, data, candidate.path, "heldout", "candidate", cfg.heldout_n)
        delta = _paired(cand.rows, base.rows)
        candidates = [Candidate(name="grpo", summary=cand.summary, delta=delta)]
        paths = {"grpo": candidate.path}
        comparison, vs_control = None, None
        if control is not None:
            ctrl = evaluate_split(
                run, cfg, data, control.path, "heldout", "sft_control", cfg.heldout_n
            )
            vs_control = _paired(cand.rows, ctrl.rows)
            ctrl_delta = _paired(ctrl.rows, base.rows)
            comparison = ControlComparison(
                summary=ctrl.summary,
                grpo_minus_control=vs_control["delta"],
                ci95=vs_control["ci95"],
                delta_success=ctrl_delta["delta"],
                delta_ci95=ctrl_delta["ci95"],
            )
            candidates.append(Candidate(name="sft_control", summary=ctrl.summary, delta=ctrl_delta))
            paths["sft_control"] = control.path
        decision = choose(base.summary, candidates, cfg.gate, vs_control)
        report = GateReport(
            n=cand.summary["n"],
            baseline=base.summary,
            candidate=cand.summary,
            delta_success=delta["delta"],
            ci95=delta["ci95"],
            gate=decision,
            sft_control=comparison,
            chosen_path=paths[decision.chosen],
            stage=info,
        )
        metrics = {"delta_success": report.delta_success, "gate_passed": float(decision.passed)}
        if comparison is not None:
            metrics["grpo_minus_control"] = comparison.grpo_minus_control
        mlflow.log_metrics(metrics)
        mlflow.set_tags({"gate.chosen": decision.chosen, "gate.reason": decision.reason[:5000]})
        left_out = {"stage"} if comparison else {"stage", "sft_control"}
        mlflow.log_dict(report.model_dump(mode="json", exclude=left_out), "heldout_gate.json")
    return report
