"""Stage 7: register the candidate; move ``champion`` only when the gate passed."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.model_registry import (
    champion_version,
    move_champion,
    register_candidate,
    registered_name,
)
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import Checkpoint, GateReport, Registration
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="promote", **STAGE_OPTIONS)
def promote(
    run: RunContext, cfg: LifecycleConfig, candidate: Checkpoint, gate: GateReport
) -> Registration:
    with stage(run, "promote") as info:
        name = registered_name(cfg.env)
        passed = gate.gate.passed
        tags = {
            "gymflow.run_id": run.run_id,
            "gate_passed": str(passed),
            "gate_reason": gate.gate.reason,
            "heldout_delta_success": f"{gate.delta_success}",
        }
        version = register_candidate(Path(candidate.path), name, tags)
        previous = champion_version(name)
        if passed:
            move_champion(name, version)
    return Registration(
        model=name,
        version=version,
        champion_alias_moved=passed,
        previous_champion=previous,
        stage=info,
    )
