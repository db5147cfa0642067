"""GRPO with the difficulty-aware pool, stopped after a checkpoint and resumed: the resumed run
continues with the pool state the first one had at that checkpoint.

Real parts: TRL's trainer with our rollout_func, a tiny transformers model, the counter
environment in-process (graded so rewards and success vary), the Parquet ledger. One run goes
through unbroken; the other fails before its step-4 checkpoint (after checkpoint-2) and runs again on the
same folder, as a re-run of the stage would be. Their ledgers must match row for row.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from graded_counter import Crash, PassingCounter

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.lifecycle.run_plots import grpo_steps, zero_variance_share
from gymflow.rollout.store import Lineage
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo
from gymflow.train.task_pool import TASK_POOL_FILE, TaskPool

SETTINGS = GRPOSettings(
    max_steps=5, prompts_per_step=2, num_generations=4, max_new_tokens=10, learning_rate=1e-2,
    temperature=1.0, save_every=2, time_budget_s=None, max_resample_rounds=1,
    task_sampling="difficulty", validate_every=None, demo_loss=None,
)  # fmt: skip


def _run(base: Path, out: Path, callbacks=()) -> dict:
    import torch

    torch.set_num_threads(1)
    env = PassingCounter()
    pool = build_tasks(env, 12, seed=3, heldout_frac=0.0, val_frac=0.0)
    lineage = Lineage("pool-resume", 0, 0, "grpo", env.name, env.version, "test")
    source = RolloutSource(
        env, build_app(env), pool, SETTINGS, out, lineage, pool_file=out / TASK_POOL_FILE
    )
    return run_grpo(base, out, source, SETTINGS, log_to_mlflow=False, callbacks=list(callbacks))


def test_a_resumed_run_continues_with_the_same_pool_state(counter_model, tmp_path):
    whole = _run(counter_model, tmp_path / "whole")
    ledger = pl.read_parquet(tmp_path / "whole" / TASK_POOL_FILE)
    assert whole["steps"] == 5 and sorted(set(ledger["step"])) == list(range(5))
    # the pool learned something to steer by: some tasks revisited, several classes seen
    classes = TaskPool([], SETTINGS.task_pool)
    classes.rows = ledger.to_dicts()
    classes._fold()
    assert ledger["task_id"].n_unique() < ledger.height
    assert sum(1 for n in classes.counts().values() if n) >= 2
    # the plot's zero-variance share, read from the stored rollouts, is the run's own count
    stats = whole["dynamic_sampling"]
    assert stats["groups_generated"] == ledger.height
    share = zero_variance_share(grpo_steps(tmp_path / "whole"))
    assert share == stats["groups_zero_variance"] / stats["groups_generated"]
    assert share == pytest.approx(1 - ledger["rewards_differ"].mean())

    out = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="crash at step 4"):
        _run(counter_model, out, [Crash(4)])  # after step 3's groups, before checkpoint-4
    left = pl.read_parquet(out / TASK_POOL_FILE)
    assert left["step"].max() == 3  # groups past the resume point were recorded: dropped
    resumed = _run(counter_model, out)
    assert resumed["resumed_from"].endswith("checkpoint-2")
    again = pl.read_parquet(out / TASK_POOL_FILE)
    assert again.to_dicts() == ledger.to_dicts()  # the same draws and outcomes, step by step
