"""Stage 7: register the gate's chosen candidate; move ``champion`` only when the gate passed.

The version's tags carry its lineage, the gate's evidence (the decision, the tasks and
episodes it took, its level, the chosen checkpoints) and the verifiers it was gated with, which
a later run's drift sentinel (``tasks/drift.py``) compares with.

The registered model is ``LifecycleConfig.model_name``: ``gymflow-<env>``, for a mix of
environments ``gymflow-mix-<its environments sorted, joined by '-'>`` (``registered_model``
names another)."""

from __future__ import annotations

import json
from pathlib import Path

from gymflow.env.registry import get_env
from gymflow.eval.drift import verifier_identity
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.lineage import version_description, version_tags
from gymflow.lifecycle.model_card import start_license
from gymflow.lifecycle.model_registry import (
    champion_version,
    get_version,
    move_champion,
    register_candidate,
)
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import GateReport, Registration, ResolvedPolicy, TaskData
from gymflow.lifecycle.stages.drift import RUN_DIR_TAG, VERIFIERS_TAG


def promote_candidate(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    start: ResolvedPolicy,
    gate: GateReport,
) -> Registration:
    """Register ``gate.chosen_path`` (tagged with its lineage and the gate's evidence) as
    ``challenger``; when the gate passed it becomes ``champion`` (the old one
    ``previous_champion``)."""
    import mlflow

    with stage(run, "promote") as info:
        name = cfg.model_name
        passed = gate.gate.passed
        tags = version_tags(run.run_id, cfg.env_label, cfg.digest(), data, start, gate)
        tags |= _per_env_tags(cfg, gate) | _gate_tags(run, cfg, gate)
        description = version_description(run.run_id, cfg.env_label, start, gate)
        license_id = start_license(cfg.model_path, start.source, _champion_tags(name, start))
        version = register_candidate(
            Path(gate.chosen_path), name, tags, description, license_id=license_id
        )
        previous = champion_version(name)
        if passed:
            move_champion(name, version, f"gate of run {run.run_id}: {gate.gate.chosen} passed")
        heldout = ("heldout.success", "heldout.well_formed", "heldout.unsafe_rate")
        mlflow.log_metrics(  # the source run of the version carries the evidence too
            {"gate_passed": float(passed), "registered_version": float(version)}
            | {key: float(tags[key]) for key in heldout}
            | {"heldout_delta_success": float(tags["heldout_delta_success"])}
        )
        mlflow.set_tags({"gymflow.candidate": tags["gymflow.candidate"]})
    return Registration(
        model=name,
        version=version,
        champion_alias_moved=passed,
        previous_champion=previous,
        stage=info,
    )


def _champion_tags(name: str, start: ResolvedPolicy) -> dict[str, str] | None:
    """The tags of the champion version the run started from (None: it started elsewhere)."""
    if start.champion_version is None:
        return None
    return dict(get_version(name, start.champion_version).tags)


def _gate_tags(run: RunContext, cfg: LifecycleConfig, gate: GateReport) -> dict[str, str]:
    """How the gate decided (rule, tasks and episodes it took, its level, the chosen
    candidate's confidence sequence, each candidate's checkpoint) and what the drift sentinel
    of later runs compares with: the verifiers it was gated with and where its episodes are."""
    decision = gate.gate
    chosen = next((v for v in decision.verdicts if v.candidate == decision.chosen), None)
    tags = {
        "gate.rule": decision.rule,
        "gate.alpha": f"{decision.alpha:g}",
        "gate.tasks_used": str(decision.tasks_used),
        "gate.tasks_available": str(decision.tasks_available),
        "gate.episodes_used": str(decision.episodes_used),
        "gate.episodes_full": str(decision.episodes_full),
        VERIFIERS_TAG: json.dumps(verifier_identity([get_env(e) for e in cfg.env_weights])),
        RUN_DIR_TAG: run.run_dir,
    }
    if chosen is not None:
        tags["gate.cs"] = f"[{chosen.cs[0]:+.4f}, {chosen.cs[1]:+.4f}]"
    if decision.checkpoints:
        tags["gate.checkpoints"] = ", ".join(f"{k} {v}" for k, v in decision.checkpoints.items())
    if gate.verdict is not None:  # is RL worth it here, on the registered version
        tags["gymflow.rl_verdict"] = gate.verdict["verdict"]
        tags["gymflow.rl_verdict.reason"] = gate.verdict["sentence"][:5000]
    return tags


def _per_env_tags(cfg: LifecycleConfig, gate: GateReport) -> dict[str, str]:
    """A mix's version also says its weights and, per environment, the chosen candidate's
    held-out success and its gain over the start (``heldout.<env>.success``, ...)."""
    if not gate.per_env:
        return {}
    chosen = gate.gate.chosen or "grpo"
    tags = {"lineage.env_weights": ", ".join(f"{k}={v:.3g}" for k, v in cfg.env_weights.items())}
    for env, held in gate.per_env.items():
        delta = held.deltas[chosen]
        tags[f"heldout.{env}.success"] = f"{held.summaries[chosen]['success']:.4f}"
        tags[f"heldout.{env}.delta_success"] = f"{delta['delta']}"
        tags[f"heldout.{env}.delta_ci95"] = f"[{delta['ci95'][0]:+.4f}, {delta['ci95'][1]:+.4f}]"
    return tags
