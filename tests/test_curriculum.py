"""The curriculum (gymflow.train.curriculum): GRPO's draws stay on the levels inside the
learnable band, and the frontier moves up as the pool records a level solved."""

from __future__ import annotations

from leveled_tasks import leveled_task

from gymflow.core.task_record import Task
from gymflow.train.curriculum import CurriculumPool, CurriculumSettings, frontier, level_of
from gymflow.train.task_pool import TaskPoolSettings

BAND = (0.1, 0.9)


def _pool(tmp_path=None) -> tuple[list[Task], CurriculumPool]:
    tasks = [leveled_task(10 * level + i, level) for level in range(3) for i in range(8)]
    start = {0: 0.97, 1: 0.5, 2: 0.0}  # the preflight's pass rates per level
    pool = CurriculumPool(
        tasks, TaskPoolSettings(), start, BAND, CurriculumSettings(min_seen=4), seed=3,
        ledger=tmp_path / "task_pool.parquet" if tmp_path else None,
    )  # fmt: skip
    return tasks, pool


def _levels(pool: CurriculumPool, ids: list[str]) -> set[int]:
    return {pool.levels[t] for t in ids}


def test_draws_stay_on_the_open_levels_until_a_level_is_solved_then_move_up(tmp_path):
    _, pool = _pool(tmp_path)
    assert pool.open_levels() == [1]
    for step in range(3):
        assert _levels(pool, pool.draw(2, step, 0)) == {1}
    assert pool.counts()["hardest_open_level"] == 1
    for i in range(4):  # the policy now solves level 1: four of its tasks all-correct
        pool.record(3, 0, f"t1{i}", [True] * 4, [1.0] * 4)
    assert pool.level_rates()[1] == 1.0 and pool.open_levels() == [2]
    assert _levels(pool, pool.draw(4, 4, 0)) == {2}
    # the ledger is the state: a resumed run opens what the first one had open
    pool.save()
    _, again = _pool(tmp_path)
    assert again.open_levels() == [2]
    again.resume_at(3)  # training restarts before the step that solved level 1
    assert again.open_levels() == [1]


def test_a_level_keeps_the_preflight_rate_until_enough_of_it_was_drawn(tmp_path):
    _, pool = _pool()
    for i in range(3):
        pool.record(0, 0, f"t1{i}", [True] * 4, [1.0] * 4)
    assert pool.level_rates()[1] == 0.5  # three seen: not yet its own rate (min_seen 4)


def test_a_batch_is_always_full_when_the_open_levels_run_short():
    tasks, pool = _pool()
    chosen = pool.draw(12, 0, 0)  # level 1 has 8 tasks
    assert len(chosen) == len(set(chosen)) == 12 and _levels(pool, chosen) != {1}
    assert sum(pool.levels[t] == 1 for t in chosen) == 8


def test_frontier_and_levels():
    assert frontier({0: 0.98, 1: 0.7, 2: 0.3, 3: 0.0}, BAND) == [1, 2]
    assert frontier({0: 1.0, 1: 0.95, 2: 0.02, 3: 0.0}, BAND) == [2]  # the next step up
    assert frontier({0: 1.0, 1: 0.95}, BAND) == [1] and frontier({0: 0.0, 1: 0.0}, BAND) == [0]
    assert level_of(leveled_task(1, 3)) == 3 and level_of(leveled_task(1, None)) is None
    flagged = leveled_task(1, None).model_copy(update={"ground_truth": {"level": True}})
    assert level_of(flagged) is None  # a flag is not a level
