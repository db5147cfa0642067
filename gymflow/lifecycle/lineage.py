"""What a registered model version says about itself: lineage tags and a description.

Tags (searchable in MLflow, shown by ``gymflow models list``): the run id, the candidate
(``grpo`` or ``sft_control``), the task data's hash, the environment and its version, the base
model the run started from, the config digest, the code version, the held-out metrics and the
gate's evidence (passed, reason, GRPO − control).
"""

from __future__ import annotations

from gymflow.lifecycle.code_version import code_version
from gymflow.lifecycle.stage_results import GateReport, ResolvedPolicy, TaskData


def chosen_summary(gate: GateReport) -> tuple[dict, float, list[float]]:
    """Held-out summary, success gain over the start and its CI of the gate's chosen candidate."""
    control = gate.sft_control
    if gate.gate.chosen == "sft_control" and control is not None:
        return control.summary, control.delta_success, control.delta_ci95
    return gate.candidate, gate.delta_success, gate.ci95


def version_tags(
    run_id: str,
    env: str,
    config_digest: str,
    data: TaskData,
    start: ResolvedPolicy,
    gate: GateReport,
) -> dict[str, str]:
    summary, delta, ci95 = chosen_summary(gate)
    tags = {
        "gymflow.run_id": run_id,
        "gymflow.candidate": gate.gate.chosen or "grpo",
        "lineage.dataset_hash": data.dataset_hash,
        "lineage.env": env,
        "lineage.env_version": data.env_version,
        "lineage.base_model": f"{start.source} ({start.path})",
        "lineage.config_digest": config_digest,
        "lineage.code_version": code_version(),
        "heldout.n": str(gate.n),
        "heldout.success": f"{summary['success']:.4f}",
        "heldout.well_formed": f"{summary['well_formed']:.4f}",
        "heldout.unsafe_rate": f"{summary['unsafe_rate']:.4f}",
        "heldout.baseline_success": f"{gate.baseline['success']:.4f}",
        "heldout_delta_success": f"{delta}",
        "heldout.delta_ci95": f"[{ci95[0]:+.4f}, {ci95[1]:+.4f}]",
        "gate_passed": str(gate.gate.passed),
        "gate_reason": gate.gate.reason,
    }
    if gate.gate.grpo_minus_control is not None:
        tags["grpo_minus_control"] = f"{gate.gate.grpo_minus_control}"
    return tags


def version_description(run_id: str, env: str, start: ResolvedPolicy, gate: GateReport) -> str:
    """Markdown shown on the version's page in the MLflow UI."""
    summary, delta, ci95 = chosen_summary(gate)
    who = {"grpo": "GRPO policy", "sft_control": "SFT control"}.get(gate.gate.chosen or "grpo")
    verdict = "promoted to champion" if gate.gate.passed else "not promoted"
    return (
        f"{who} of lifecycle run `{run_id}` on `{env}`, started from {start.source}.\n\n"
        f"Held-out success {summary['success']:.3f} (n={gate.n}) vs the start "
        f"{gate.baseline['success']:.3f}: {100 * delta:+.1f} points "
        f"(95% CI [{100 * ci95[0]:+.1f}, {100 * ci95[1]:+.1f}]).\n\n"
        f"Gate: {verdict}. {gate.gate.reason}"
    )
