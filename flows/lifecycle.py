"""The RLVR lifecycle: generate → profile → drift → baseline → (SFT) → GRPO ‖ controls → gate →
promote.

Wiring only: each stage is a Prefect task in ``tasks/`` returning a typed result
(:mod:`gymflow.lifecycle.stage_results`) that the next stages take as input. The flow run is
named after the run id and linked both ways with the run's MLflow parent run; the run ends with
``summary.json`` and ``report.md`` (plots included) in the run folder, MLflow and Prefect.
With ``config.envs`` (a weighted mix of environments) the same stages work per environment:
tasks, verifier reports, baseline, demonstrations and held-out sets per environment, GRPO
batches drawn by weight, and a gate that also refuses a regression on any one of them.
"""

from __future__ import annotations

import time

from prefect import flow

from gymflow.lifecycle import run_budget
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.run_links import link_flow_run
from gymflow.lifecycle.run_report import publish_report
from gymflow.lifecycle.stage_results import LifecycleResults
from gymflow.lifecycle.summary import build_summary, write_summary
from gymflow.tasks.drift import verifier_drift
from gymflow.tasks.evaluate import baseline_eval
from gymflow.tasks.gate import heldout_gate
from gymflow.tasks.generate import generate_tasks
from gymflow.tasks.policy import resolve_policy
from gymflow.tasks.profile import profile_verifier_stage
from gymflow.tasks.promote import promote
from gymflow.tasks.train import sft_stage, train_grpo_with_control


@flow(name="rlvr-lifecycle", flow_run_name="{run.run_id}")
def lifecycle(run: RunContext, config: LifecycleConfig) -> dict:
    """One run; returns ``summary.json``'s content. Baseline = the policy GRPO starts from."""
    started = time.time()
    links = link_flow_run(run)
    data = generate_tasks(run, config)
    current = resolve_policy(run, config)
    profile = profile_verifier_stage(run, config, data, current)
    drift = verifier_drift(run, config, data)  # stops when the champion's verdicts flip
    baseline = baseline_eval(run, config, data, current)
    # with config.run_budget_s, each training phase gets a config whose budget is what is left
    spent = {"sft": run_budget.spent_s([data, current, profile, drift, baseline])}
    used, sft = {}, None
    if baseline.needs_sft:
        used["sft"] = run_budget.budgeted(config, "sft", spent["sft"])
        sft = sft_stage(run, used["sft"], data, current)
    start = current if sft is None else sft
    spent["grpo"] = spent["sft"] + run_budget.spent_s([sft])
    used["grpo"] = run_budget.budgeted(config, "grpo", spent["grpo"])
    candidate, control, rft = train_grpo_with_control(run, used["grpo"], data, start)
    sft, candidate = run_budget.name_the_limit(config, used, sft, candidate)
    gate = heldout_gate(run, config, data, start, candidate, control, rft)
    registry = promote(run, config, data, current, gate)
    results = LifecycleResults(
        generate_tasks=data,
        resolve_policy=current,
        profile_verifier=profile,
        verifier_drift=drift,
        baseline_eval=baseline,
        sft=sft,
        grpo=candidate,
        sft_control=control,
        rft_control=rft,
        heldout_gate=gate,
        promote=registry,
    )
    summary = build_summary(run, config, results, time.time() - started, links)
    if (budget := run_budget.run_budget_record(config, spent, used)) is not None:
        summary["run_budget"] = budget
    write_summary(run, summary)
    publish_report(run, results, summary)
    return summary
