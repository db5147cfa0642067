"""The RLVR lifecycle: generate → profile → baseline → (SFT) → GRPO → held-out gate → promote."""

from __future__ import annotations

import time

from prefect import flow

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.summary import build_summary, write_summary
from gymflow.tasks.evaluate import baseline_eval
from gymflow.tasks.gate import heldout_gate
from gymflow.tasks.generate import generate_tasks
from gymflow.tasks.policy import resolve_policy
from gymflow.tasks.profile import profile_verifier_stage
from gymflow.tasks.promote import promote
from gymflow.tasks.train import grpo_stage, sft_control_stage, sft_stage
from gymflow.train import twin_clock


@flow(name="rlvr-lifecycle")
def lifecycle(run: RunContext, config: LifecycleConfig) -> dict:
    started = time.time()
    stages: dict[str, dict] = {}
    stages["generate_tasks"] = data = generate_tasks(run, config)
    stages["resolve_policy"] = current = resolve_policy(run, config)
    stages["profile_verifier"] = profile_verifier_stage(run, config, data, current)
    stages["baseline_eval"] = baseline = baseline_eval(run, config, data, current)
    start = current
    if baseline["needs_sft"]:
        stages["sft"] = start = sft_stage(run, config, data, current)
    control = None
    if config.sft_control and "sft" in stages and config.control_beside_grpo:
        import torch

        threads = max(1, torch.get_num_threads() // 2)
        twin_clock.forget_failure(run.dir / "grpo")
        beside = sft_control_stage.submit(run, config, data, start, None, threads)
        stages["grpo"] = candidate = grpo_stage(run, config, data, start, threads)
        stages["sft_control"] = control = beside.result()
    else:
        stages["grpo"] = candidate = grpo_stage(run, config, data, start)
        if config.sft_control and "sft" in stages:
            stages["sft_control"] = control = sft_control_stage(
                run, config, data, start, candidate["train_wall_s"]
            )
    stages["heldout_gate"] = gate = heldout_gate(run, config, data, start, candidate, control)
    stages["promote"] = registry = promote(
        run, config, candidate, {**gate["gate"], "delta_success": gate["delta_success"]}
    )
    summary = build_summary(run, config, stages, gate, registry, time.time() - started)
    write_summary(run, summary)
    return summary
