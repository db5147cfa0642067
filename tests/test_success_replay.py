"""GRPO's own verified successes as imitation data (``demo_loss.success_share``).

Real parts: TRL's trainer with our rollout_func, a tiny transformers model, the counter
environment in-process (graded so some samples succeed), the run's Parquet rollout parts. The
replay a run builds holds exactly the stored successes (the latest of each task), a resumed
run rebuilds the same replay from the store, and the imitation batches draw from it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from graded_counter import Crash
from grpo_kill_child import GradedCounter
from transformers import AutoTokenizer

from gymflow.core.scoring import Score
from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.rollout.store import Lineage, read_rollouts
from gymflow.train.demo_loss import DemoLoss, DemoLossSettings
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo
from gymflow.train.sft import demonstrations
from gymflow.train.success_replay import SuccessReplay

DEMO = DemoLossSettings(weight=1.0, batch_size=8, success_share=0.5)
SETTINGS = GRPOSettings(
    max_steps=5, prompts_per_step=2, num_generations=4, max_new_tokens=10, learning_rate=1e-2,
    temperature=1.0, save_every=2, time_budget_s=None, max_resample_rounds=1,
    task_sampling="uniform", validate_every=None, demo_loss=DEMO,
)  # fmt: skip


class DigitCounter(GradedCounter):
    """``GradedCounter`` (reward = share of digits) where any digit is a success: a random
    policy succeeds now and then, so there is something to replay."""

    def verify(self, task, items) -> Score:
        score = super().verify(task, items)
        return replace(score, success=score.reward > 0)


def _run(base: Path, out: Path, callbacks=()) -> tuple[dict, RolloutSource]:
    import torch

    torch.set_num_threads(1)
    env = DigitCounter()
    pool = build_tasks(env, 12, seed=3, heldout_frac=0.0, val_frac=0.0)
    demos = demonstrations(env, AutoTokenizer.from_pretrained(base), pool[:4])
    lineage = Lineage("replay", 0, 0, "grpo", env.name, env.version, "test")
    source = RolloutSource(env, build_app(env), pool, SETTINGS, out, lineage)
    result = run_grpo(
        base, out, source, SETTINGS, log_to_mlflow=False, callbacks=list(callbacks), demos=demos
    )
    return result, source


def _expected(out: Path) -> dict[str, tuple[int, list[int]]]:
    """Per task: (step, completion) of its stored success with the latest step, smallest seed."""
    rows = read_rollouts(out).filter(pl.col("success")).sort(["iteration", "seed"])
    best: dict[str, tuple[int, int, list[int]]] = {}
    for row in rows.iter_rows(named=True):
        seen = best.get(row["task_id"])
        if seen is None or row["iteration"] > seen[0]:
            best[row["task_id"]] = (row["iteration"], row["seed"], row["completion_ids"])
    return {t: (step, ids) for t, (step, _, ids) in best.items()}


def _held(replay: SuccessReplay) -> dict[str, tuple[int, list[int]]]:
    return {t: (s.step, s.completion) for t, s in replay.samples.items()}


def test_the_replay_holds_the_stored_successes_and_survives_a_resume(counter_model, tmp_path):
    whole, source = _run(counter_model, tmp_path / "whole")
    assert whole["steps"] == 5
    expected = _expected(tmp_path / "whole")
    assert len(expected) >= 2, "the graded counter should give some verified successes"
    assert _held(source.replay) == expected
    # every sample kept is one the verifier passed: its completion is a stored success's
    stored = read_rollouts(tmp_path / "whole")
    ok = {tuple(ids) for ids in stored.filter(pl.col("success"))["completion_ids"].to_list()}
    assert all(tuple(s.completion) in ok for s in source.replay.samples.values())

    out = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="crash at step 4"):
        _run(counter_model, out, [Crash(4)])
    resumed, again = _run(counter_model, out)
    assert resumed["resumed_from"].endswith("checkpoint-2")
    assert _held(again.replay) == expected  # rebuilt from steps 0-1 on disk, then 2-4 again


def test_imitation_batches_draw_from_the_replay(counter_model):
    env = DigitCounter()
    tokenizer = AutoTokenizer.from_pretrained(counter_model)
    demos = demonstrations(env, tokenizer, build_tasks(env, 6, seed=1, heldout_frac=0, val_frac=0))
    replay = SuccessReplay(seed=2)
    loss = DemoLoss(demos, tokenizer, DEMO, seed=2, replay=replay)
    assert all(m == [1] * len(c) for _, c, m in loss.batch(0))  # empty replay: demonstrations
    replay.resume_at(0, None)
    from gymflow.rollout.episode import Episode

    task = build_tasks(env, 1, seed=4, heldout_frac=0, val_frac=0)[0]
    ep = Episode(
        task=task, seed=7, prompt_ids=[5, 6], completion_ids=[8, 9, 10], env_mask=[1, 0, 1]
    )
    ep.score = {"success": True}
    failed = Episode(task=task, seed=3, prompt_ids=[5], completion_ids=[4], env_mask=[1])
    failed.score = {"success": False}
    replay.record(0, [ep, failed])
    batch = loss.batch(1)
    own = [row for row in batch if row == ([5, 6], [8, 9, 10], [1, 0, 1])]
    assert len(own) == round(DEMO.batch_size * DEMO.success_share) and len(batch) == 8
    assert loss.batch(1) == batch  # seeded by step: a resumed run draws the same
