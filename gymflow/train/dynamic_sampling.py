"""Dynamic sampling (DAPO): fill a step's batch with groups that teach something.

A group is the G samples of one task; when their rewards are all equal its advantage is zero
and GRPO learns nothing from it. :class:`DynamicSampler` runs the step's tasks, keeps the
informative groups, and replaces the others with fresh tasks — from the difficulty pool when
the run keeps one, else drawn at random (by the mix's weights on several environments) — for
up to ``max_resample_rounds`` more rounds. A pool that runs dry is topped up with zero-variance
groups, so the batch stays full. TRL 1.16 has no dynamic sampling; this is why it is here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from gymflow.data.env_mix import draw_tasks
from gymflow.rollout.episode import Episode
from gymflow.train.task_pool import TaskPool, has_variance

Round = Callable[[list[str], int], list[tuple]]
"""``run_round(task_ids, round) -> [(planned, episode | None, error | None)]``, G per task in
order."""


@dataclass
class Filled:
    """A step's batch: the groups trained on, and every rollout made (dropped ones included)."""

    kept: list[list[Episode]]
    done: list[tuple] = field(default_factory=list)
    failed: list = field(default_factory=list)


class DynamicSampler:
    """Fills batches from ``pool_ids`` (``env_pools``/``weights`` on a mix, ``task_pool`` when
    the run samples by difficulty), counting what it generated in :attr:`stats`."""

    def __init__(
        self,
        enabled: bool,
        max_rounds: int,
        seed: int,
        pool_ids: list[str],
        env_pools: dict[str, list[str]],
        weights: dict[str, float],
        task_pool: TaskPool | None,
    ) -> None:
        self.enabled, self.max_rounds, self.seed = enabled, max_rounds, seed
        self.pool_ids, self.env_pools, self.weights = pool_ids, env_pools, weights
        self.task_pool = task_pool
        self.stats = {"groups_generated": 0, "groups_zero_variance": 0, "groups_refilled": 0}

    def first_tasks(self, asked: list[str], step: int) -> list[str]:
        """The step's tasks: the pool's or the mix's pick of as many as TRL asked for."""
        if self.task_pool is not None:
            return self.task_pool.draw(len(asked), step, 0)
        if len(self.env_pools) > 1:
            rng = random.Random(f"{self.seed}-{step}-mix")
            return draw_tasks(self.env_pools, self.weights, len(asked), rng)
        return asked

    def fill(self, wanted: list[str], g: int, step: int, run_round: Round) -> Filled:
        out = Filled(kept=[])
        spare: list[list[Episode]] = []
        candidates = list(wanted)
        for round_ in range(self.max_rounds + 1):
            results = run_round(candidates, round_)
            out.done += results
            if any(error is not None for _, _, error in results):
                break  # stored by the caller, then raised: the batch cannot be trained on
            for i in range(0, len(results), g):
                group = [ep for _, ep, _ in results[i : i + g]]
                informative = self._record(group, step, round_)
                if informative and len(out.kept) < len(wanted):
                    out.kept.append(group)
                else:
                    spare.append(group)
            if not self.enabled or len(out.kept) == len(wanted):
                break
            candidates = self._replacements(len(wanted) - len(out.kept), step, round_, out.done)
            if not candidates:
                break
        out.failed = [error for _, _, error in out.done if error is not None]
        while not out.failed and len(out.kept) < len(wanted):  # pool dry: zero-variance groups
            out.kept.append(spare.pop(0))
        self.stats["groups_refilled"] += sum(g[0].task.task_id not in wanted for g in out.kept)
        return out

    def _record(self, group: list[Episode], step: int, round_: int) -> bool:
        informative = has_variance([e.reward for e in group])
        if self.task_pool is not None:
            self.task_pool.record(
                step, round_, group[0].task.task_id,
                [e.score["success"] for e in group], [e.reward for e in group],
            )  # fmt: skip
        self.stats["groups_generated"] += 1
        self.stats["groups_zero_variance"] += not informative
        return informative

    def _replacements(self, missing: int, step: int, round_: int, done: list) -> list[str]:
        """Twice as many fresh tasks as groups are missing (some will be flat again)."""
        if self.task_pool is not None:
            tried = {p.task.task_id for p, _, _ in done}
            return self.task_pool.draw(missing * 2, step, round_ + 1, tried)
        rng = random.Random(f"{self.seed}-{step}-{round_}")
        if len(self.env_pools) > 1:
            return draw_tasks(self.env_pools, self.weights, missing * 2, rng)
        return rng.sample(self.pool_ids, min(len(self.pool_ids), missing * 2))
