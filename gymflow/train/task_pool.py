"""Difficulty-aware task sampling for GRPO: spend rollouts where the policy sometimes succeeds.

A group whose G rewards are all equal has zero advantage and teaches nothing. The pool
remembers, for every task GRPO has drawn, its latest group: how many samples succeeded (the
task's pass rate) and whether the rewards differed. That puts each task in one class:

* **unknown** — never drawn;
* **learning** — the rewards differed, or some samples succeeded and some did not;
* **failed** — no sample succeeded and every reward was the same;
* **solved** — every sample succeeded: retired.

A draw fills each slot with a revisit of a known task with probability ``replay_share``
(learning tasks weighted ``1 + floor - pass rate``: the harder ones first; failed ones
``failed_weight``, a lower rate, and all of them together at most ``failed_share`` of the
revisit odds), and with an unknown task otherwise — so unknown tasks are
explored before failed ones are retried, and a task solved once is not drawn again while
anything else is left. Draws are seeded by ``(seed, step, round)`` and depend on the recorded
groups only, so a resumed run draws what the first one would have.

The state is a ledger, ``task_pool.parquet``: one row per group recorded (step, round, task,
samples, successes, rewards differed), rewritten after every step. The pool is the fold of its
rows; :meth:`TaskPool.resume_at` drops the rows of the step training restarts at and later,
which is the state the run had when that checkpoint was saved.

GRPO's dynamic sampling stays the second line: a group that still comes out zero-variance is
replaced within the step, by tasks the pool draws (:class:`gymflow.train.grpo.RolloutSource`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandera.polars as pa
import polars as pl
from pydantic import BaseModel, Field

from gymflow.data.schemas import read_table, write_table

TASK_POOL_FILE = "task_pool.parquet"

LEDGER = pa.DataFrameSchema(
    {
        "step": pa.Column(pl.Int64, pa.Check.ge(0)),
        "round": pa.Column(pl.Int64, pa.Check.ge(0)),
        "task_id": pa.Column(pl.String, pa.Check.str_length(min_value=1)),
        "samples": pa.Column(pl.Int64, pa.Check.ge(1)),
        "successes": pa.Column(pl.Int64, pa.Check.ge(0)),
        "rewards_differ": pa.Column(pl.Boolean),
    },
    strict=True,
    name="task pool ledger",
)


class TaskPoolSettings(BaseModel):
    """How the difficulty-aware pool splits a batch between revisits and new tasks."""

    model_config = {"extra": "forbid"}

    replay_share: float = Field(
        0.8, ge=0.0, le=1.0, description="Chance a slot revisits a known task (else: unknown)."
    )
    failed_weight: float = Field(
        0.05, ge=0.0, description="Revisit weight of a failed task (a learning one: 1+floor-p)."
    )
    learning_floor: float = Field(
        0.25, gt=0.0, description="Added to a learning task's weight so no such task is starved."
    )
    failed_share: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Most of a revisit's odds the failed tasks hold together (1: no bound).",
    )


@dataclass(frozen=True)
class Seen:
    """A task's latest group."""

    samples: int
    successes: int
    rewards_differ: bool

    @property
    def pass_rate(self) -> float:
        return self.successes / self.samples

    @property
    def kind(self) -> str:
        if self.successes == self.samples:
            return "solved"
        if self.successes == 0 and not self.rewards_differ:
            return "failed"
        return "learning"


def has_variance(rewards: list[float]) -> bool:
    """A group teaches GRPO something only if its rewards differ."""
    return len(set(rewards)) > 1


class TaskPool:
    """Pass rates of the tasks drawn so far, and draws weighted toward informative ones."""

    def __init__(
        self,
        task_ids: list[str],
        settings: TaskPoolSettings,
        seed: int = 0,
        ledger: Path | None = None,
    ) -> None:
        self.task_ids, self.settings, self.seed, self.path = list(task_ids), settings, seed, ledger
        self.rows: list[dict] = []
        self.seen: dict[str, Seen] = {}
        if ledger is not None and ledger.is_file():
            self.rows = read_table(ledger, LEDGER).to_dicts()
            self._fold()

    def record(self, step: int, round_: int, task_id: str, successes: list[bool], rewards) -> None:
        """One group of ``task_id`` (its samples' success and reward) was rolled out."""
        row = {
            "step": step,
            "round": round_,
            "task_id": task_id,
            "samples": len(successes),
            "successes": sum(bool(s) for s in successes),
            "rewards_differ": has_variance(list(rewards)),
        }
        self.rows.append(row)
        self._apply(row)

    def draw(self, n: int, step: int, round_: int, exclude: set[str] = frozenset()) -> list[str]:
        """Up to ``n`` distinct task ids, none in ``exclude`` (seeded by step and round)."""
        rng = random.Random(f"pool-{self.seed}-{step}-{round_}")
        left = [t for t in self.task_ids if t not in exclude]
        unknown = [t for t in left if t not in self.seen]
        kinds = {t: self.seen[t].kind for t in left if t in self.seen}
        learning = {t: self._weight(self.seen[t]) for t, k in kinds.items() if k == "learning"}
        failed = [t for t, k in kinds.items() if k == "failed" and self.settings.failed_weight]
        chosen: list[str] = []
        while len(chosen) < n and (unknown or learning or failed):
            pick = None
            if (learning or failed) and (not unknown or rng.random() < self.settings.replay_share):
                if failed and rng.random() < self._failed_odds(len(failed), learning):
                    pick = failed.pop(rng.randrange(len(failed)))
                elif learning:
                    pick = rng.choices(list(learning), weights=list(learning.values()))[0]
                    del learning[pick]
            if pick is None:  # a new task; or, with none left, a failed one
                pick = (unknown or failed).pop(rng.randrange(len(unknown or failed)))
            chosen.append(pick)
        if len(chosen) < n:  # only solved tasks are left: they are drawn rather than none
            rest = [t for t in left if t not in set(chosen)]
            chosen += rng.sample(rest, min(n - len(chosen), len(rest)))
        return chosen

    def counts(self) -> dict[str, int]:
        """Tasks per class (``unknown``, ``learning``, ``failed``, ``solved``)."""
        kinds = Counter(s.kind for s in self.seen.values())
        out = {k: kinds.get(k, 0) for k in ("learning", "failed", "solved")}
        return {"unknown": len(self.task_ids) - len(self.seen), **out}

    def save(self) -> None:
        """Write the ledger (atomically) when the pool has a file."""
        if self.path is not None:
            write_table(pl.DataFrame(self.rows, schema=_LEDGER_TYPES), LEDGER, self.path)

    def resume_at(self, step: int) -> None:
        """Training restarts at ``step``: forget the groups of that step and later."""
        self.rows = [r for r in self.rows if r["step"] < step]
        self._fold()
        self.save()

    def _weight(self, seen: Seen) -> float:
        """A learning task's revisit weight: the harder, the likelier."""
        return 1.0 + self.settings.learning_floor - seen.pass_rate

    def _failed_odds(self, failed: int, learning: dict[str, float]) -> float:
        """Chance a revisit goes to a failed task: the class's share of the weights, at most
        ``failed_share``. Each failed task weighs ``failed_weight``, so the class's share grows
        with its number: late in a run failed tasks outnumbered learning ones and a fifth to a
        quarter of all groups were failed revisits, two thirds of them zero-variance
        (docs/tuning.md). With no learning task left the bound still holds; the rest of the
        revisits go to new tasks."""
        weight = failed * self.settings.failed_weight
        odds = weight / (weight + sum(learning.values()))
        return odds if self.settings.failed_share >= 1.0 else min(odds, self.settings.failed_share)

    def _fold(self) -> None:
        self.seen = {}
        for row in self.rows:
            self._apply(row)

    def _apply(self, row: dict) -> None:
        self.seen[row["task_id"]] = Seen(row["samples"], row["successes"], row["rewards_differ"])


_LEDGER_TYPES = {
    "step": pl.Int64,
    "round": pl.Int64,
    "task_id": pl.String,
    "samples": pl.Int64,
    "successes": pl.Int64,
    "rewards_differ": pl.Boolean,
}
