"""Stage 6: held-out evaluation of the start, the candidates (GRPO, the SFT control) and the
registry's champion, then the gate: the best candidate is promoted only if it beats the
champion (or, without one, the start) significantly with no guardrail broken
(:mod:`gymflow.eval.gate`)."""

from __future__ import annotations

import polars as pl
from prefect import task

from gymflow.eval.compare import paired_differences
from gymflow.eval.gate import Candidate, Champion, GateResult, choose, latency_figures
from gymflow.eval.general_check import evaluate_general, general_envs
from gymflow.eval.splits import GeneratedSplit
from gymflow.eval.stats import paired_delta
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.model_registry import champion_version, download_version, registered_name
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import (
    ChampionComparison,
    Checkpoint,
    ControlComparison,
    Evaluation,
    GateReport,
    TaskData,
)
from gymflow.tasks.evaluate import evaluate_split
from gymflow.tasks.options import STAGE_OPTIONS


def _paired(a_rows: str, b_rows: str) -> dict:
    a = pl.read_parquet(a_rows).sort("task_id")
    b = pl.read_parquet(b_rows).sort("task_id")
    return paired_delta(a["success"].cast(float).to_list(), b["success"].cast(float).to_list())


def _with_latency(evaluation: Evaluation) -> dict:
    rows = pl.read_parquet(evaluation.rows)
    figures = latency_figures(rows["completion_tokens"].to_list(), rows["latency_s"].to_list())
    return evaluation.summary | figures


def _champion(run: RunContext, cfg: LifecycleConfig) -> tuple[str, str] | None:
    """The registry's champion of the environment now: ``(version, local folder)``."""
    name = registered_name(cfg.env)
    version = champion_version(name)
    if version is None:
        return None
    path = download_version(name, version, run.dir / "policies" / f"champion-v{version}")
    return version, str(path)


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

    def held_out(path: str, label: str) -> Evaluation:
        return evaluate_split(run, cfg, data, path, "heldout", label, cfg.heldout_n)

    with stage(run, "heldout_gate") as info:
        base, cand = held_out(baseline.path, "baseline"), held_out(candidate.path, "candidate")
        base_summary = _with_latency(base)
        paths, evals = {"grpo": candidate.path}, {"grpo": cand}
        if control is not None:
            paths["sft_control"] = control.path
            evals["sft_control"] = held_out(control.path, "sft_control")
        champ, start_label, champion = _champion(run, cfg), "the start", None
        if champ is not None and champ[1] == baseline.path:
            start_label = f"the start (champion v{champ[0]})"  # GRPO started from the champion
        elif champ is not None:
            found = held_out(champ[1], f"champion-v{champ[0]}")
            champion = ChampionComparison(
                version=champ[0], summary=_with_latency(found), rows=found.rows
            )
        candidates = [
            Candidate(
                name=name,
                summary=_with_latency(ev),
                delta=_paired(ev.rows, base.rows),
                champion_delta=_paired(ev.rows, champion.rows) if champion else None,
            )
            for name, ev in evals.items()
        ]
        vs_control = _paired(cand.rows, evals["sft_control"].rows) if control else None
        held = Champion(version=champion.version, summary=champion.summary) if champion else None

        def decide() -> GateResult:
            return choose(base_summary, candidates, cfg.gate, vs_control, held, start_label)

        # General capability can only refuse: only candidates that pass everything else (and
        # the start, to pair with) are evaluated on the general environments.
        worth = [v.candidate for v in decide().verdicts if v.passed]
        envs = general_envs(cfg.gate.general_envs, {cfg.env}) if worth else []
        general = evaluate_general(
            envs, {"baseline": baseline.path} | {name: paths[name] for name in worth},
            GeneratedSplit.like(cfg), cfg.gate.general_n, cfg.seed, cfg.max_new_tokens, run.dir,
            run.cache_dir,
        )  # fmt: skip
        for c in candidates:
            if c.name in worth:
                c.general = {
                    env: paired_differences(by[c.name], by["baseline"])["success"]
                    for env, by in general.items()
                }
        decision = decide()
        comparison = None
        if control is not None:
            ctrl = candidates[1]
            comparison = ControlComparison(
                summary=ctrl.summary,
                grpo_minus_control=vs_control["delta"],
                ci95=vs_control["ci95"],
                delta_success=ctrl.delta["delta"],
                delta_ci95=ctrl.delta["ci95"],
            )
        report = GateReport(
            n=cand.summary["n"],
            baseline=base_summary,
            candidate=candidates[0].summary,
            delta_success=candidates[0].delta["delta"],
            ci95=candidates[0].delta["ci95"],
            gate=decision,
            sft_control=comparison,
            champion=champion,
            general={
                env: {label: _success(rows) for label, rows in by.items()}
                for env, by in general.items()
            },
            chosen_path=paths[decision.chosen],
            stage=info,
        )
        _log(report)
    return report


def _success(rows: list[dict]) -> float:
    return sum(r["success"] for r in rows) / max(1, len(rows))


def _log(report: GateReport) -> None:
    import mlflow

    decision = report.gate
    metrics = {"delta_success": report.delta_success, "gate_passed": float(decision.passed)}
    if report.sft_control is not None:
        metrics["grpo_minus_control"] = report.sft_control.grpo_minus_control
    for verdict in decision.verdicts:
        if verdict.champion_delta is not None:
            metrics[f"{verdict.candidate}_minus_champion"] = verdict.champion_delta
    for env, by in report.general.items():
        metrics |= {f"general/{env}/{label}_success": v for label, v in by.items()}
    mlflow.log_metrics(metrics)
    mlflow.set_tags(
        {
            "gate.chosen": decision.chosen,
            "gate.reason": decision.reason[:5000],
            "gate.compared_with": ", ".join(decision.compared_with),
        }
    )
    left_out = {"stage"} | ({"sft_control"} if report.sft_control is None else set())
    mlflow.log_dict(report.model_dump(mode="json", exclude=left_out), "heldout_gate.json")
