"""A curriculum over difficulty levels: GRPO draws from the levels its policy can learn from.

An environment whose generator has a difficulty knob writes it into each task's ground truth
as an integer ``level`` (``math``: the MATH level 1–5; ``toolbox``: 0 one call … 3 three calls
with nested arguments). A level whose tasks the policy solves on nearly every sample, or on
none, gives GRPO groups of one reward: nothing to learn. The curriculum keeps GRPO's draws on
the **frontier**, the levels whose pass rate lies inside the learnable band:

* the start's pass rate per level comes from the preflight (:mod:`gymflow.train.readiness`);
* during GRPO, a level's rate is the mean latest pass rate of its tasks the difficulty pool
  has drawn (:class:`~gymflow.train.task_pool.TaskPool`), once ``min_seen`` of them have been;
* :func:`frontier` opens the levels inside the band; with none inside, the easiest level below
  it (the next step up: a harder level's rate is the preflight's until the pool draws it, and
  the policy that outgrew the levels below has usually come closer to it), or, when every
  level is above the band, the hardest. As the policy solves a level its rate passes the
  band's top, the level closes and the next one opens: the frontier fills as tasks are solved.

:class:`CurriculumPool` is the difficulty pool with draws limited to the open levels (topped up
from the others when the open ones run short, so a batch is always full). Its state is the
pool's ledger plus the preflight's rates, so a resumed run opens the levels the first would
have. Tasks without a level (or a pool of one level) are drawn as the plain pool draws them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from gymflow.core.task_record import Task
from gymflow.train.task_pool import TaskPool, TaskPoolSettings


class CurriculumSettings(BaseModel):
    """Steering GRPO's draws to the difficulty levels inside the learnable band."""

    model_config = {"extra": "forbid"}

    min_seen: int = Field(
        4,
        ge=1,
        description="Tasks of a level the pool must have drawn before their pass rates replace "
        "the preflight's estimate of that level.",
    )


def level_of(task: Task) -> int | None:
    """A task's difficulty level: its ground truth's integer ``level``, else None."""
    level = task.ground_truth.get("level")
    return level if isinstance(level, int) and not isinstance(level, bool) else None


def frontier(rates: dict[int, float], band: tuple[float, float]) -> list[int]:
    """The levels to draw from: those whose pass rate is inside ``band``; with none inside,
    the easiest level below the band, or with none below, the hardest (higher = harder).

    >>> frontier({0: 0.98, 1: 0.7, 2: 0.3, 3: 0.0}, (0.1, 0.9))
    [1, 2]
    >>> frontier({0: 1.0, 1: 0.95, 2: 0.02, 3: 0.0}, (0.1, 0.9))
    [2]
    >>> frontier({0: 1.0, 1: 0.95}, (0.1, 0.9)), frontier({0: 0.0, 1: 0.0}, (0.1, 0.9))
    ([1], [0])
    """
    low, high = band
    inside = sorted(level for level, rate in rates.items() if low <= rate <= high)
    if inside or not rates:
        return inside
    below = [level for level, rate in rates.items() if rate < low]
    return [min(below)] if below else [max(rates)]


class CurriculumPool(TaskPool):
    """The difficulty pool, drawing only from the levels :func:`frontier` opens."""

    def __init__(
        self,
        tasks: list[Task],
        settings: TaskPoolSettings,
        start_rates: dict[int, float],
        band: tuple[float, float],
        curriculum: CurriculumSettings,
        seed: int = 0,
        ledger: Path | None = None,
    ) -> None:
        super().__init__([t.task_id for t in tasks], settings, seed, ledger)
        self.levels = {t.task_id: level_of(t) for t in tasks}
        self.start_rates, self.band, self.curriculum = dict(start_rates), band, curriculum

    def level_rates(self) -> dict[int, float]:
        """Each level's pass rate: the pool's, once enough of its tasks were drawn, else the
        preflight's."""
        seen: dict[int, list[float]] = {}
        for task_id, record in self.seen.items():
            seen.setdefault(self.levels.get(task_id), []).append(record.pass_rate)
        rates = dict(self.start_rates)
        for level, passes in seen.items():
            if level is not None and len(passes) >= self.curriculum.min_seen:
                rates[level] = sum(passes) / len(passes)
        return rates

    def open_levels(self) -> list[int]:
        return frontier(self.level_rates(), self.band)

    def draw(self, n: int, step: int, round_: int, exclude: set[str] = frozenset()) -> list[str]:
        opened = set(self.open_levels())
        closed = {
            t for t, level in self.levels.items() if level is not None and level not in opened
        }
        chosen = super().draw(n, step, round_, set(exclude) | closed)
        if len(chosen) < n:  # the open levels ran short: the batch is filled from the others
            chosen += super().draw(n - len(chosen), step, round_, set(exclude) | set(chosen))
        return chosen

    def counts(self) -> dict[str, int]:
        """The pool's classes, and the easiest and hardest level open now."""
        opened = self.open_levels()
        return super().counts() | (
            {"easiest_open_level": min(opened), "hardest_open_level": max(opened)} if opened else {}
        )
