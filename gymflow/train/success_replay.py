"""GRPO's own verified successes, kept for imitation (``grpo.demo_loss.success_share``).

The demonstration term (:mod:`gymflow.train.demo_loss`) imitates the run's fixed gold
demonstrations — the same few hundred the SFT control trains on. GRPO rolls out on the whole
train pool, thousands of tasks beyond them, and the verifier says which of its samples are
right. Imitating those verified samples as well (self-imitation, as in expert iteration,
RAFT or ReST: supervised learning on the policy's own filtered samples) turns the verifier's
verdicts into imitation data the control does not have; the policy gradient still shapes the
rest.

The replay holds, for every task GRPO has rolled out, the token view of its latest successful
sample (prompt ids, completion ids, and the mask of the model's own tokens: tool outputs in a
multi-turn episode are context, not targets). Draws are seeded by ``(seed, step)`` over the
tasks in id order, so they do not depend on the order the successes came in (of a task's
successes in one step, the one with the smallest sampling seed is kept). A resumed run
rebuilds the replay from the rollouts already stored (the run's ``rollouts/`` parts before the
step training restarts at), so it draws what the first run would have.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gymflow.rollout.episode import Episode
from gymflow.rollout.store import PART_GLOB, read_parts


@dataclass(frozen=True)
class Sample:
    """One verified success: train on ``completion`` where ``mask`` is 1, after ``prompt``."""

    step: int
    prompt: list[int]
    completion: list[int]
    mask: list[int]


class SuccessReplay:
    """The latest verified success of every task rolled out so far."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.samples: dict[str, Sample] = {}

    def __len__(self) -> int:
        return len(self.samples)

    def record(self, step: int, episodes: list[Episode]) -> None:
        """Keep the successes among ``episodes`` (one step's rollouts) that can be trained on."""
        # of a task's successes in one step, the one with the smallest seed (as resume_at picks)
        for ep in sorted(episodes, key=lambda e: e.seed, reverse=True):
            ok = ep.score.get("success") and not ep.policy_failed and ep.has_token_view
            if ok and any(ep.env_mask):
                self.samples[ep.task.task_id] = Sample(
                    step, list(ep.prompt_ids), list(ep.completion_ids), list(ep.env_mask)
                )

    def draw(self, n: int, step: int) -> list[Sample]:
        """``n`` samples (with replacement) for step ``step``; none while the replay is empty."""
        if not self.samples:
            return []
        rng = random.Random(f"{self.seed}-{step}-successes")
        ids = sorted(self.samples)
        return [self.samples[ids[rng.randrange(len(ids))]] for _ in range(n)]

    def resume_at(self, step: int, folder: Path | None) -> None:
        """Training restarts at ``step``: the successes stored before it, from ``folder`` (the
        run's ``rollouts/`` parts; none without a store)."""
        self.samples = {}
        if folder is None or not any(Path(folder).glob(PART_GLOB)):
            return
        rows = (
            read_parts(Path(folder))
            .filter(pl.col("success") & (pl.col("iteration") < step))
            .sort(["iteration", "seed"], descending=[False, True])
            .select("iteration", "task_id", "prompt_ids", "completion_ids", "env_mask")
        )
        for it, task_id, prompt, completion, mask in rows.iter_rows():
            if any(mask):
                self.samples[task_id] = Sample(it, prompt, completion, mask)
