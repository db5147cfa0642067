"""The difficulty-aware task pool on its own: classes, draw rates, the ledger and resume.

Draw rates are measured over many seeded draws, so each assertion is about what the weights
do, not about one lucky draw.
"""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.train.task_pool import TaskPool, TaskPoolSettings

IDS = [f"t{i:02d}" for i in range(40)]


def _group(pool: TaskPool, step: int, task: str, successes: int, samples: int = 8, flat=False):
    """A group of ``samples`` with ``successes`` at reward 1; the others 0, or all one
    partial reward with ``flat`` (no success and nothing to learn from)."""
    rewards = [1.0] * successes + [0.0] * (samples - successes)
    if flat:
        rewards = [0.5] * samples
    pool.record(step, 0, task, [i < successes for i in range(samples)], rewards)


def _seeded(pool: TaskPool) -> None:
    """t00-t09 solved, t10-t19 failed (flat rewards), t20-t24 learning at 1/8, t25-t29 at 7/8."""
    for i in range(10):
        _group(pool, 0, IDS[i], 8)
    for i in range(10, 20):
        _group(pool, 0, IDS[i], 0, flat=True)
    for i in range(20, 25):
        _group(pool, 1, IDS[i], 1)
    for i in range(25, 30):
        _group(pool, 1, IDS[i], 7)


def _rates(pool: TaskPool, draws: int = 400, n: int = 4) -> Counter:
    seen = Counter()
    for step in range(draws):
        seen.update(pool.draw(n, step, 0))
    return seen


def test_classes_follow_the_latest_group():
    pool = TaskPool(IDS, TaskPoolSettings())
    _seeded(pool)
    assert pool.counts() == {"unknown": 10, "learning": 10, "failed": 10, "solved": 10}
    _group(pool, 2, "t00", 3)  # a solved task that fails again is learning again
    pool.record(2, 0, "t10", [False] * 4, [0.5, 0.5, 0.2, 0.5])  # partial credit differs
    assert pool.counts() == {"unknown": 10, "learning": 12, "failed": 9, "solved": 9}


def test_draws_favour_learning_tasks_retire_solved_and_revisit_failed_less():
    pool = TaskPool(IDS, TaskPoolSettings(replay_share=0.5))
    _seeded(pool)
    seen = _rates(pool)
    per_task = {
        kind: sum(seen[t] for t in ids) / len(ids)
        for kind, ids in {
            "solved": IDS[:10],
            "failed": IDS[10:20],
            "hard": IDS[20:25],
            "easy": IDS[25:30],
            "unknown": IDS[30:],
        }.items()
    }
    assert per_task["solved"] == 0
    assert per_task["hard"] > per_task["easy"] > per_task["failed"] > 0
    revisits = 1 - sum(seen[t] for t in IDS[30:]) / sum(seen.values())
    assert revisits == pytest.approx(0.5, abs=0.05)  # the replay share, measured
    # uniform draws would give every task 400 * 4 / 40 = 40
    assert per_task["hard"] > 2 * 40 and per_task["failed"] < 40


def test_many_failed_tasks_together_hold_at_most_their_share_of_revisits():
    """Each failed task weighs failed_weight, so a hundred of them would outweigh four
    learning tasks; the class as a whole is held to failed_share of the revisit odds."""
    ids = [f"f{i:03d}" for i in range(100)] + ["l0", "l1", "l2", "l3"]

    def failed_rate(settings: TaskPoolSettings) -> float:
        pool = TaskPool(ids, settings)
        for t in ids[:100]:
            _group(pool, 0, t, 0)
        for t in ids[100:]:
            _group(pool, 0, t, 1)
        drawn = [pool.draw(1, step, 0)[0] for step in range(2000)]
        return sum(t.startswith("f") for t in drawn) / len(drawn)

    unbounded = failed_rate(TaskPoolSettings(replay_share=1.0, failed_share=1.0))
    assert unbounded == pytest.approx(5.0 / (5.0 + 4 * 1.125), abs=0.04)  # 100 x 0.05 vs 4 x 1.125
    assert failed_rate(TaskPoolSettings(replay_share=1.0)) == pytest.approx(0.1, abs=0.025)
    assert failed_rate(TaskPoolSettings(replay_share=1.0, failed_share=0.0)) == 0.0


def test_a_step_draws_distinct_tasks_and_honours_exclusions():
    pool = TaskPool(IDS, TaskPoolSettings(replay_share=1.0))
    _seeded(pool)
    for step in range(50):
        drawn = pool.draw(8, step, 1, exclude={"t20", "t21"})
        assert len(drawn) == len(set(drawn)) == 8
        assert not {"t20", "t21"} & set(drawn)
    assert pool.draw(4, 7, 0) == pool.draw(4, 7, 0)  # seeded by (seed, step, round)
    assert pool.draw(4, 7, 0) != pool.draw(4, 7, 1)


def test_when_only_solved_tasks_are_left_they_are_still_drawn():
    pool = TaskPool(IDS[:6], TaskPoolSettings())
    for t in IDS[:6]:
        _group(pool, 0, t, 8)
    assert sorted(pool.draw(6, 1, 0)) == IDS[:6]


def test_the_ledger_survives_a_restart_and_resume_forgets_later_steps(tmp_path):
    ledger = tmp_path / "task_pool.parquet"
    first = TaskPool(IDS, TaskPoolSettings(), seed=3, ledger=ledger)
    _seeded(first)
    first.save()
    again = TaskPool(IDS, TaskPoolSettings(), seed=3, ledger=ledger)
    assert again.counts() == first.counts()
    assert [again.draw(4, s, 0) for s in range(20)] == [first.draw(4, s, 0) for s in range(20)]

    # what a run that stopped after step 0 had, against the full ledger resumed at step 1
    step0 = TaskPool(IDS, TaskPoolSettings(), seed=3)
    for i in range(10):
        _group(step0, 0, IDS[i], 8)
    for i in range(10, 20):
        _group(step0, 0, IDS[i], 0, flat=True)
    again.resume_at(1)
    assert again.counts() == step0.counts() != first.counts()
    assert [again.draw(4, s, 0) for s in range(20)] == [step0.draw(4, s, 0) for s in range(20)]
    on_disk = pl.read_parquet(ledger)
    assert on_disk.height == 20 and on_disk["step"].max() == 0


def test_a_corrupt_ledger_is_refused_with_its_kind(tmp_path):
    ledger = tmp_path / "task_pool.parquet"
    ledger.write_bytes(b"not parquet")
    with pytest.raises(GymflowError) as err:
        TaskPool(IDS, TaskPoolSettings(), ledger=ledger)
    assert err.value.kind == FailureKind.CORRUPT_FILE
