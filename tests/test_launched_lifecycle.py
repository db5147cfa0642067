"""The lifecycle with ``train_processes`` 2: SFT, GRPO and the control each train on two
processes (``accelerate launch``, DDP over gloo), with what the in-process stages do.

One smoke lifecycle on a real Prefect engine and MLflow store, the embedded model. What must
hold with two processes: every stage ran as a 2-process launch; SFT scored its sampled
validation (its target and its pick) on rank 0; GRPO and the control were chosen by the one
checkpoint rule (step 0, every 2 steps and the last); GRPO's rollout rows landed once each in
the run's rollout folder with the run's lineage, rows from both ranks' episodes; the control ran
after GRPO for GRPO's training wall time; the gate judged both candidates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gymflow.lifecycle.config import LifecycleConfig


def test_two_processes_run_every_training_stage(gym_home, prefect_engine, tmp_path):
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_context import RunContext
    from gymflow.lifecycle.tracking import parent_run_id
    from gymflow.rollout.store import read_rollouts

    cfg = LifecycleConfig.smoke().overridden(
        {
            "train_processes": 2,
            "sft": {"max_steps": 6, "eval_every": 3},
            "grpo": {"max_steps": 4, "validate_every": 2},
            "gate": {"general_envs": []},
        }
    )
    run_id = "launched-2"
    ctx = RunContext(
        run_id=run_id, run_dir=str(tmp_path / run_id), home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )  # fmt: skip
    summary = lifecycle(ctx, cfg)
    run_dir = Path(summary["run_dir"])

    for stage in ("sft", "grpo", "sft_control"):  # what trained, counted inside the launch
        assert summary[stage]["processes"] == 2, stage
    sft = summary["sft"]
    assert sft["steps"] in (3, 6) and sft["history"], "sampled validation scored every 3 steps"
    assert {h["step"] for h in sft["history"]} <= {3, 6}

    grpo, control = summary["grpo"], summary["sft_control"]
    assert control["beside_grpo"] is False and control["budget_s"] == grpo["train_wall_s"]
    for folder, last in (("grpo", grpo["steps"]), ("sft_control", control["steps"])):
        record = json.loads((run_dir / folder / "validation.json").read_text())
        steps = [h["step"] for h in record["history"]]
        assert steps == sorted({0, *range(2, last + 1, 2), last}), (folder, steps)

    rows = read_rollouts(run_dir / "rollouts")  # each rank ran half of a step's episodes
    assert rows.height == 4 * grpo["dynamic_sampling"]["groups_generated"], "both ranks' rows"
    assert set(rows["run_id"]) == {run_id}
    every_write = read_rollouts(run_dir / "rollouts", every_attempt=True)
    assert every_write.height == rows.height, "each row written once (rank 0), none twice"
    assert {"grpo", "sft_control"} == {v["candidate"] for v in summary["gate"]["verdicts"]}


def test_batches_that_do_not_split_are_refused_before_any_stage():
    with pytest.raises(ValueError, match="grpo.prompts_per_step 3 does not split over"):
        LifecycleConfig.smoke().overridden({"train_processes": 2, "grpo": {"prompts_per_step": 3}})
    with pytest.raises(ValueError, match='grpo.rollout engine "ray" trains in one process'):
        LifecycleConfig.smoke().overridden(
            {"train_processes": 2, "grpo": {"rollout": {"engine": "ray"}}}
        )
