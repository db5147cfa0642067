"""A run from the champion — every scheduled run once a home has one — trains and gates the
SFT control too, and both candidates hand the gate their step by the one checkpoint rule.

One scheduled lifecycle run (the deployment's flow, ``scheduled_lifecycle``, on a real
Prefect engine and MLflow store, smoke budget) starts from a champion registered beforehand.
The champion already formats (``format_threshold`` 0 stands for that: no baseline is below it),
so SFT is skipped — the case where the control used to disappear. It is a champion-start run
and a scheduled run at once. The control is "the same start trained by SFT on the run's
demonstrations for GRPO's wall time": here the champion, trained beside GRPO.
"""

from __future__ import annotations

import json
from pathlib import Path

NAME = "gymflow-control-always"


def test_a_scheduled_run_from_the_champion_trains_and_gates_the_control(
    gym_home, prefect_engine, micro_tool_call_model
):
    import mlflow

    from gymflow.deployments.lifecycle import scheduled_lifecycle
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.model_registry import move_champion, register_candidate

    with mlflow.start_run(run_name="champion-for-control-test"):
        version = register_candidate(Path(micro_tool_call_model), NAME, {"gymflow.run_id": "x"})
    move_champion(NAME, version, "a champion to start from")
    cfg = LifecycleConfig.smoke().overridden(
        {
            "registered_model": NAME,
            "format_threshold": 0.0,
            "gate": {"general_envs": []},
            "grpo": {"validate_every": 2},
        }  # fmt: skip
    )
    summary = scheduled_lifecycle(config=cfg)

    assert summary["policy_start"] == f"champion v{version}" and summary["sft_ran"] is False
    assert "sft" not in summary["stages"]
    control = summary["sft_control"]
    assert control["steps"] > 0 and control["beside_grpo"] is True
    assert control["budget_s"] == summary["grpo"]["train_wall_s"], "for GRPO's wall time"
    gate = summary["gate"]
    assert [v["candidate"] for v in gate["verdicts"]] == ["grpo", "sft_control"]
    assert gate["compared_with"] == [f"the start (champion v{version})"]
    assert "sft_control:" in gate["reason"] or gate["chosen"] == "sft_control"

    # both candidates were chosen by one rule, on the same validation tasks: step 0 (the
    # champion itself), every 2 steps and the last, greedy
    run_dir = Path(summary["run_dir"])
    for folder, last in (("grpo", summary["grpo"]["steps"]), ("sft_control", control["steps"])):
        record = json.loads((run_dir / folder / "validation.json").read_text())
        steps = [h["step"] for h in record["history"]]
        assert steps == sorted({0, *range(2, last + 1, 2), last}), (folder, steps)
        assert record["last_step"] == last
    rule = "greedy success on the same 16 val tasks every 2 steps, step 0 (the start)"
    assert f"checkpoints by one rule ({rule}" in gate["reason"]
    assert gate["checkpoints"].keys() == {"grpo", "sft_control"}
    assert gate["reason"].count(" of ") >= 2
