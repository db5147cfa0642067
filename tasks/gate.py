"""Stage 6: held-out evaluation of the start, the candidates (GRPO, the SFT control) and the
registry's champion, then the gate: the best candidate is promoted only if it beats the
champion (or, without one, the start) significantly with no guardrail broken
(:mod:`gymflow.eval.gate`). A run on a mix of environments is judged on the pooled held-out
set and, per environment, must not be significantly worse on any of them."""

from __future__ import annotations

import polars as pl
from prefect import task

from gymflow.data.task_table import read_tasks
from gymflow.eval.compare import paired_differences
from gymflow.eval.gate import Candidate, Champion, GateResult, choose, latency_figures
from gymflow.eval.general_check import env_sets, evaluate_general, external_sets, general_envs
from gymflow.eval.splits import GeneratedSplit
from gymflow.eval.stats import paired_delta
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.model_registry import champion_version, download_version
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import (
    ChampionComparison,
    Checkpoint,
    ControlComparison,
    EnvHeldout,
    Evaluation,
    GateReport,
    TaskData,
)
from gymflow.tasks.evaluate import evaluate_split
from gymflow.tasks.options import STAGE_OPTIONS


def _paired(a_rows: str, b_rows: str, tasks: set[str] | None = None) -> dict:
    """Paired success difference A − B over the held-out tasks (only ``tasks``, if given)."""
    a = pl.read_parquet(a_rows).sort("task_id")
    b = pl.read_parquet(b_rows).sort("task_id")
    if tasks is not None:
        a, b = a.filter(pl.col("task_id").is_in(tasks)), b.filter(pl.col("task_id").is_in(tasks))
    return paired_delta(a["success"].cast(float).to_list(), b["success"].cast(float).to_list())


def _paired_per_env(a_rows: str, b_rows: str, by_env: dict[str, set[str]]) -> dict[str, dict]:
    """A mix: :func:`_paired` on each environment's tasks; nothing for one environment."""
    if len(by_env) < 2:
        return {}
    return {env: _paired(a_rows, b_rows, tasks) for env, tasks in by_env.items()}


def _with_latency(evaluation: Evaluation) -> dict:
    rows = pl.read_parquet(evaluation.rows)
    figures = latency_figures(rows["completion_tokens"].to_list(), rows["latency_s"].to_list())
    return evaluation.summary | figures


def _champion(run: RunContext, cfg: LifecycleConfig) -> tuple[str, str] | None:
    """The registry's champion of the environment now: ``(version, local folder)``."""
    name = cfg.model_name
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
        champ, start_label, champion, champion_eval = _champion(run, cfg), "the start", None, None
        if champ is not None and champ[1] == baseline.path:
            start_label = f"the start (champion v{champ[0]})"  # GRPO started from the champion
        elif champ is not None:
            champion_eval = held_out(champ[1], f"champion-v{champ[0]}")
            champion = ChampionComparison(
                version=champ[0], summary=_with_latency(champion_eval), rows=champion_eval.rows
            )
        by_env: dict[str, set[str]] = {}
        for t in read_tasks(data.paths["heldout"]):
            by_env.setdefault(t.env, set()).add(t.task_id)
        candidates = [
            Candidate(
                name=name,
                summary=_with_latency(ev),
                delta=_paired(ev.rows, base.rows),
                champion_delta=_paired(ev.rows, champion.rows) if champion else None,
                env_deltas=_paired_per_env(ev.rows, base.rows, by_env),
                champion_env_deltas=_paired_per_env(ev.rows, champion.rows, by_env)
                if champion
                else {},
            )
            for name, ev in evals.items()
        ]
        vs_control = _paired(cand.rows, evals["sft_control"].rows) if control else None
        held = Champion(version=champion.version, summary=champion.summary) if champion else None

        def decide() -> GateResult:
            return choose(base_summary, candidates, cfg.gate, vs_control, held, start_label)

        # An environment's general check can only refuse: only candidates that pass everything
        # else (and the start, to pair with) are evaluated there. External sets (BFCL) are the
        # run's transfer figures as well, so the start and every candidate are evaluated.
        worth = [v.candidate for v in decide().verdicts if v.passed]
        envs = general_envs(cfg.gate.general_envs, set(cfg.env_weights)) if worth else []
        start = {"baseline": baseline.path}
        where = (GeneratedSplit.like(cfg), cfg.seed, cfg.max_new_tokens, run.dir, run.cache_dir)
        general = evaluate_general(
            env_sets(envs, cfg.gate.general_n), start | {n: paths[n] for n in worth}, *where
        )
        general |= evaluate_general(
            external_sets(cfg.gate.general_sets, cfg.gate.general_sets_n), start | paths, *where
        )
        for c in candidates:
            c.general = {
                name: paired_differences(by[c.name], by["baseline"])["success"]
                for name, by in general.items()
                if c.name in by
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
                name: {label: _success(rows) for label, rows in by.items()}
                for name, by in general.items()
            },
            general_n={name: len(by["baseline"]) for name, by in general.items()},
            general_deltas={
                name: {c.name: _delta(c.general[name]) for c in candidates if name in c.general}
                for name in general
            },
            chosen_path=paths[decision.chosen],
            per_env=_per_env_report(base, evals, candidates, champion_eval),
            stage=info,
        )
        _log(report)
    return report


def _per_env_report(
    base: Evaluation,
    evals: dict[str, Evaluation],
    candidates: list[Candidate],
    champion: Evaluation | None,
) -> dict[str, EnvHeldout]:
    """A mix's held-out figures per environment: every policy's summary and each candidate's
    paired success gain over the start (empty for one environment)."""
    if len(base.per_env) < 2:
        return {}
    out = {}
    for env, summary in base.per_env.items():
        summaries = {"baseline": summary} | {name: ev.per_env[env] for name, ev in evals.items()}
        if champion is not None:
            summaries["champion"] = champion.per_env[env]
        out[env] = EnvHeldout(
            n=summary["n"],
            summaries=summaries,
            deltas={c.name: c.env_deltas[env] for c in candidates},
        )
    return out


def _success(rows: list[dict]) -> float:
    return sum(r["success"] for r in rows) / max(1, len(rows))


def _delta(difference: dict) -> dict:
    """A paired difference as the report keeps it: ``{"delta", "ci95"}``."""
    return {"delta": difference["delta"], "ci95": list(difference["ci95"])}


def _log(report: GateReport) -> None:
    import mlflow

    decision = report.gate
    metrics = {"delta_success": report.delta_success, "gate_passed": float(decision.passed)}
    if report.sft_control is not None:
        metrics["grpo_minus_control"] = report.sft_control.grpo_minus_control
    for verdict in decision.verdicts:
        if verdict.champion_delta is not None:
            metrics[f"{verdict.candidate}_minus_champion"] = verdict.champion_delta
    for name, by in report.general.items():
        metrics |= {f"general/{name}/{label}_success": v for label, v in by.items()}
        for label, d in report.general_deltas.get(name, {}).items():
            lo, hi = d["ci95"]
            metrics |= {f"general/{name}/{label}_delta_success": d["delta"],
                        f"general/{name}/{label}_delta_ci95_lo": lo,
                        f"general/{name}/{label}_delta_ci95_hi": hi}  # fmt: skip
    for env, held in report.per_env.items():
        metrics |= {f"{env}/delta_success_{name}": d["delta"] for name, d in held.deltas.items()}
    mlflow.log_metrics(metrics)
    mlflow.set_tags(
        {
            "gate.chosen": decision.chosen,
            "gate.reason": decision.reason[:5000],
            "gate.compared_with": ", ".join(decision.compared_with),
        }
    )
    left_out = {"stage"} | ({"sft_control"} if report.sft_control is None else set())
    left_out |= set() if report.per_env else {"per_env"}
    mlflow.log_dict(report.model_dump(mode="json", exclude=left_out), "heldout_gate.json")
