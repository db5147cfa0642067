"""GRPO's learning rate falls with the run's progress: by steps or by wall time, whichever is
further along (``GRPOSettings.lr_schedule``).

GRPO stops at ``max_steps`` or at its time budget, whichever comes first, and which one it is
depends on the machine (on a slow one the budget stops the default well before its step cap;
on a fast one the cap stops it). A schedule by steps alone (TRL's
``lr_scheduler_type``) would still be part-way down when a slow machine's budget ends the run:
cosine at step 130 of 250 is still at 47 % of the peak. Here the run's progress is
``max(step / max_steps, trained seconds / time_budget_s − 0.05)`` — the seconds from
:class:`gymflow.train.resume.Progress`, earlier attempts included — so the rate comes down to
about 0 when the run ends, either way; the 0.05 keeps a run the cap ends on steps alone, so
its rates do not depend on the machine's pace (:data:`TIME_SLACK`). transformers' ``Trainer``
builds its scheduler in ``create_scheduler``; :func:`with_progress_schedule` installs a
``LambdaLR`` over that progress there (its state, the step, is saved with each checkpoint as
any scheduler's is).

``warmup_steps`` ramps the rate up linearly over the first steps, on top of the schedule (the
first step at ``1 / warmup_steps`` of it). A fresh Adam's first updates move every weight by
about the learning rate whatever its gradient's size, and the trainer's optimizer is fresh at
GRPO's start, so its first steps at the peak can undo some of SFT's work. Off by default: a
warm-up did not change where the default's runs end (the Results log, docs/tuning.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

Schedule = Literal["constant", "linear", "cosine"]


TIME_SLACK = 0.05
"""The time share counts only once it leads the step share by this much (5 % of the budget,
12 s of the default's 240 s): a run the step cap ends then decays by steps alone, so it trains
at the same rates on every run of a seed, whatever the first steps' warm-up cost on the clock."""


def progress(step: int, max_steps: int, elapsed_s: float, budget_s: float | None) -> float:
    """How far the run is, 0 to 1: the further along of its steps and its time budget (the
    time share less :data:`TIME_SLACK`, so it ends at ``factor(0.95)``: ~0.6 % of the peak)."""
    done = step / max_steps
    if budget_s:
        done = max(done, elapsed_s / budget_s - TIME_SLACK)
    return min(1.0, done)


def factor(kind: Schedule, done: float) -> float:
    """The share of the peak learning rate at progress ``done``."""
    if kind == "linear":
        return 1.0 - done
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * done))
    return 1.0


def warmup(step: int, warmup_steps: int) -> float:
    """The ramp's share at optimizer step ``step`` (0 for the first): ``(step + 1) / warmup_steps``
    up to 1, so no step trains at rate 0.

    >>> [warmup(s, 4) for s in range(5)], warmup(0, 0)
    ([0.25, 0.5, 0.75, 1.0, 1.0], 1.0)
    """
    return min(1.0, (step + 1) / warmup_steps) if warmup_steps > 0 else 1.0


def with_progress_schedule(
    trainer_cls,
    kind: Schedule,
    max_steps: int,
    budget_s: float | None,
    clock: Callable[[], float],
    warmup_steps: int = 0,
):
    """``trainer_cls`` whose scheduler follows :func:`factor` of :func:`progress`, times the
    :func:`warmup` ramp; ``clock()`` is the training seconds so far."""
    from torch.optim.lr_scheduler import LambdaLR

    def rate(step: int) -> float:
        ramp = warmup(step, warmup_steps)
        return ramp * factor(kind, progress(step, max_steps, clock(), budget_s))

    class ProgressSchedule(trainer_cls):
        def create_scheduler(self, num_training_steps: int, optimizer=None):
            if self.lr_scheduler is None:
                self.lr_scheduler = LambdaLR(optimizer or self.optimizer, rate)
            return self.lr_scheduler

    return ProgressSchedule
