"""The SFT control beside GRPO: it stops at GRPO's wall time, and never outlives a failed GRPO.

Real SFT (TRL's SFTTrainer) on a real tiny model; GRPO's side is played by the marker files
the GRPO stage writes (`twin_clock.grpo_markers` / `mark_finished`), from another thread.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.train import twin_clock
from gymflow.train.sft import SFTSettings, demonstrations, run_sft

SETTINGS = SFTSettings(
    max_steps=100_000,
    batch_size=4,
    eval_every=10**6,
    warmup_steps=0,
    target_sampled_success=2,
    time_budget_s=None,
)


@pytest.fixture(scope="module")
def sft_inputs(micro_tool_call_model):
    from transformers import AutoTokenizer

    env = get_env("tool_call")
    base = micro_tool_call_model
    tasks = build_tasks(env, 40, seed=3, heldout_frac=0.0, val_frac=0.0)
    return base, demonstrations(env, AutoTokenizer.from_pretrained(base), tasks)


def test_markers_round_trip_and_refuse_another_config(tmp_path):
    with twin_clock.grpo_markers(tmp_path):
        assert twin_clock.finished(tmp_path, "cfg-a") is None
        twin_clock.mark_finished(tmp_path, 12.5, "cfg-a")
    assert twin_clock.finished(tmp_path, "cfg-a") == {"wall_s": 12.5, "digest": "cfg-a"}
    assert twin_clock.finished(tmp_path, "cfg-b") is None  # another configuration's GRPO
    with twin_clock.grpo_markers(tmp_path):  # a new GRPO attempt forgets the old result
        assert twin_clock.finished(tmp_path, "cfg-a") is None


def test_failed_grpo_leaves_a_marker_that_stops_the_clock(tmp_path):
    with pytest.raises(ValueError), twin_clock.grpo_markers(tmp_path):
        raise ValueError("out of memory in step 3")
    clock = twin_clock.TwinClock(tmp_path, "cfg", os.getppid())
    with pytest.raises(GymflowError, match="out of memory in step 3") as err:
        clock(0.0)
    assert err.value.kind == FailureKind.STAGE_ABANDONED
    twin_clock.forget_failure(tmp_path)
    assert clock(0.0) is False  # no marker: keep training


def test_clock_stops_when_its_parent_is_gone(tmp_path):
    clock = twin_clock.TwinClock(tmp_path, "cfg", parent_pid=os.getppid() + 1)
    with pytest.raises(GymflowError, match="parent process is gone"):
        clock(0.0)


def test_control_trains_until_grpo_reports_its_wall_time(sft_inputs, tmp_path):
    base, demos = sft_inputs
    grpo_dir = tmp_path / "grpo"
    clock = twin_clock.TwinClock(grpo_dir, "cfg", os.getppid())
    first_check = threading.Event()
    seen: list[float] = []

    def watched(elapsed_s: float) -> bool:  # the real clock, and when the control first asked
        seen.append(elapsed_s)
        first_check.set()
        return clock(elapsed_s)

    def grpo_finishes():
        # GRPO's side reports after the control's first check (so a slow CPU cannot make the
        # first step outlast the budget): a wall time 0.5 s past what the control had trained.
        assert first_check.wait(timeout=300)
        twin_clock.mark_finished(grpo_dir, round(seen[0] + 0.5, 2), "cfg")

    threading.Thread(target=grpo_finishes).start()
    result = run_sft(base, tmp_path / "sft", demos, SETTINGS, None, None, False, watched)
    assert clock.budget_s == round(seen[0] + 0.5, 2)
    assert result["wall_s"] >= clock.budget_s  # it kept training past the marker to GRPO's time
    assert 1 < result["steps"] < SETTINGS.max_steps  # and then stopped


def test_control_is_abandoned_when_grpo_fails_beside_it(sft_inputs, tmp_path):
    base, demos = sft_inputs
    grpo_dir = tmp_path / "grpo"

    def grpo_fails():
        time.sleep(1.0)
        with pytest.raises(RuntimeError), twin_clock.grpo_markers(grpo_dir):
            raise RuntimeError("env server died")

    threading.Thread(target=grpo_fails).start()
    clock = twin_clock.TwinClock(grpo_dir, "cfg", os.getppid())
    with pytest.raises(GymflowError, match="env server died") as err:
        run_sft(base, tmp_path / "sft", demos, SETTINGS, None, None, False, clock)
    assert err.value.kind == FailureKind.STAGE_ABANDONED
    assert not (tmp_path / "sft" / "best").exists()  # nothing that looks like a finished control
