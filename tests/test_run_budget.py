"""The whole lifecycle's wall-time budget (``run_budget_s``): SFT and GRPO get what is left of
it, the run says which limit stopped each, and without it nothing changes.

The arithmetic on configs, then one real ``gymflow run --smoke`` whose GRPO, allowed 100,000
steps, is stopped by the run's budget and says so in ``summary.json`` and the printed table,
and whose rerun takes every stage from the cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gymflow.lifecycle import run_budget
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import GRPOResult, StageInfo

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))


def test_without_a_run_budget_nothing_changes():
    cfg = LifecycleConfig()
    assert run_budget.budgeted(cfg, "grpo", 1e6) is cfg
    assert run_budget.budgeted(cfg, "sft", 1e6) is cfg
    assert run_budget.run_budget_record(cfg, {"grpo": 0.0}, {"grpo": cfg}) is None


def test_each_phase_gets_what_is_left_within_its_own_budget():
    cfg = LifecycleConfig(run_budget_s=600, run_budget_reserve_s=50)
    roomy = run_budget.budgeted(cfg, "grpo", 100.0)  # 450 s left: its own 300 s stands
    assert roomy is cfg and not run_budget.binds(cfg, roomy, "grpo")
    tight = run_budget.budgeted(cfg, "grpo", 300.0)  # 250 s left
    assert tight.grpo.time_budget_s == 250.0 and run_budget.binds(cfg, tight, "grpo")
    assert tight.grpo.max_steps == cfg.grpo.max_steps and tight.sft == cfg.sft
    sft = run_budget.budgeted(cfg, "sft", 20.0)  # half of the 530 s left is above its 240 s
    assert sft.sft.time_budget_s == cfg.sft.time_budget_s
    small = LifecycleConfig(run_budget_s=300, run_budget_reserve_s=50)
    assert run_budget.budgeted(small, "sft", 20.0).sft.time_budget_s == 115.0  # half of 230
    spent = run_budget.budgeted(small, "grpo", 400.0)
    assert spent.grpo.time_budget_s == run_budget.MIN_STAGE_S, "a few steps, not none"


def test_a_stage_stopped_by_a_budget_the_run_set_names_the_run_budget():
    cfg = LifecycleConfig(run_budget_s=300, run_budget_reserve_s=50)
    used = {"grpo": run_budget.budgeted(cfg, "grpo", 200.0)}
    ran = GRPOResult(path="p", steps=10, train_wall_s=50.0, resumed_from=None,
                     dynamic_sampling={}, threads=1, rollout_dir="r", pool=10, start="s",
                     stopped_by="time_budget", stage=StageInfo(wall_s=55.0))  # fmt: skip
    sft, grpo = run_budget.name_the_limit(cfg, used, None, ran)
    assert sft is None and grpo.stopped_by == "run_budget"
    capped = ran.model_copy(update={"stopped_by": "max_steps"})
    assert run_budget.name_the_limit(cfg, used, None, capped)[1].stopped_by == "max_steps"
    own = {"grpo": cfg}  # the run budget left its own 300 s: its own budget stopped it
    assert run_budget.name_the_limit(cfg, own, None, ran)[1].stopped_by == "time_budget"


def test_a_run_whose_budget_is_spent_stops_grpo_and_says_so(tmp_path):
    """Smoke budgets, GRPO allowed 100,000 steps and its own 300 s: a 60 s run budget with 45 s
    kept for the gate leaves GRPO the 30 s minimum, which stops it."""
    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    args = [GYMFLOW, "run", "--smoke", "--set", "grpo.max_steps=100000", "--set",
            "run_budget_s=60"]  # fmt: skip
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (summary_path,) = (tmp_path / "runs").glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    budget = summary["run_budget"]
    assert (budget["budget_s"], budget["reserve_s"]) == (60, 45)
    stages = summary["stages"]
    before = sum(stages[s] for s in ("generate_tasks", "resolve_policy", "profile_verifier",
                                     "verifier_drift", "baseline_eval"))  # fmt: skip
    assert abs(budget["sft"]["spent_before_s"] - before) < 0.05
    assert budget["sft"]["time_budget_s"] == run_budget.MIN_STAGE_S  # (60 - ~10 - 45) / 2 < 30
    assert abs(budget["grpo"]["spent_before_s"] - before - stages["sft"]) < 0.05
    assert budget["grpo"] == budget["grpo"] | {
        "time_budget_s": run_budget.MIN_STAGE_S, "set_by_run_budget": True,
    }  # fmt: skip
    assert summary["grpo"]["stopped_by"] == "run_budget"
    assert 0 < summary["grpo"]["steps"] < 100_000
    assert summary["sft"]["stopped_by"] == "max_steps", "SFT's 30 smoke steps came first"
    assert "(ended by the run's time budget (run_budget_s))" in done.stdout

    # resumed, the finished stages count with the times they took: the same budgets, so every
    # stage, SFT and GRPO included, comes from the cache
    again = subprocess.run([GYMFLOW, "rerun", summary_path.parent.name], env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for name in ("sft", "grpo", "sft_control", "heldout_gate"):
        assert f"{name}: cached: done by an earlier attempt" in again.stdout, name
    assert json.loads(summary_path.read_text())["run_budget"] == budget
