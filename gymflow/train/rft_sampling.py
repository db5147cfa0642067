"""The sampling side of online rejection-sampling fine-tuning (RFT): verified successes per step.

Each step draws ``prompts_per_step`` tasks: the ids the trainer's shuffled dataset hands over
(``task_sampling="uniform"``, the default), a mix of environments by its weights, or GRPO's
:class:`~gymflow.train.task_pool.TaskPool` (``"difficulty"``). It samples ``k`` episodes of
each from the current policy through the one episode driver against each task's in-process
resources server (:func:`gymflow.rollout.driver.run_window`, seeds from
:func:`gymflow.rollout.store.plan`), and keeps the episodes the verifier calls successes, each
distinct completion of a task once. A prompt whose ``k`` samples all failed gives nothing to
imitate; with ``drop_all_failed`` it is replaced by fresh prompts from the pool (up to
``max_resample_rounds`` rounds), as GRPO's dynamic sampling replaces groups that teach nothing,
so a step trains on ``prompts_per_step`` prompts' successes when the pool has them.

What a step spent is added to :class:`Spent`: samples and model tokens generated, prompts drawn
and dropped, successes found and trained on. The update side (the loss) is
:mod:`gymflow.train.rft`; the two meet at :class:`StepBatch`, the token rows to imitate.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.data.env_mix import draw_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.rollout.driver import run_window
from gymflow.rollout.episode import Episode, Sampling
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.store import Planned, plan
from gymflow.train.task_pool import TaskPool, TaskPoolSettings

Row = tuple[list[int], list[int], list[int]]
"""(prompt ids, completion ids, target mask): imitate the completion tokens whose mask is 1
(the model's own tokens; tool outputs between turns are context)."""


@dataclass
class Spent:
    """What RFT has spent so far (every count cumulative over the run)."""

    steps: int = 0
    updates: int = 0
    """Steps whose update trained on at least one success (a step with none changes nothing)."""
    prompts_drawn: int = 0
    prompts_dropped: int = 0
    """Drawn prompts whose samples all failed."""
    samples_generated: int = 0
    tokens_generated: int = 0
    """Model tokens sampled (tool outputs between turns not counted)."""
    successes_found: int = 0
    successes_trained: int = 0
    tokens_trained: int = 0
    """Completion tokens the updates imitated."""
    rollout_s: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class StepBatch:
    """One step's verified successes to imitate (empty: nothing to train on this step)."""

    rows: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class SamplingPlan:
    """How the sampler draws and samples (the RFT settings it needs)."""

    prompts_per_step: int
    samples_per_prompt: int
    temperature: float
    max_new_tokens: int
    batch_size: int
    drop_all_failed: bool
    max_resample_rounds: int
    task_sampling: str
    task_pool: TaskPoolSettings
    seed: int


class SuccessSampler:
    """Draws a step's prompts, samples them with the current policy, keeps verified successes.

    ``envs`` is ``{name: (environment, in-process app)}``; with several, each task runs against
    its own environment and ``weights`` draw the prompts. ``pool_file`` keeps the task pool's
    ledger (resumed with :meth:`resume_at`).
    """

    def __init__(
        self,
        envs: dict[str, tuple[Environment, object]],
        pool: list[Task],
        plan_: SamplingPlan,
        weights: dict[str, float] | None = None,
        pool_file=None,
        run_id: str = "rft",
    ) -> None:
        if not pool:
            raise ValueError("RFT needs a task pool to draw prompts from")
        self.envs, self.plan, self.run_id = envs, plan_, run_id
        self.by_id = {t.task_id: t for t in pool}
        self.pool_ids = [t.task_id for t in pool]
        self.env_pools = {name: [t.task_id for t in pool if t.env == name] for name in envs}
        self.weights = dict(weights or dict.fromkeys(envs, 1.0))
        self.task_pool = None
        if plan_.task_sampling == "difficulty" and len(envs) == 1:
            self.task_pool = TaskPool(self.pool_ids, plan_.task_pool, plan_.seed, pool_file)
        self.spent = Spent()
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        self.loop.close()

    def resume_at(self, step: int, spent: dict | None) -> None:
        """Training restarts at ``step``: the pool forgets later groups, the ledger is restored."""
        if self.task_pool is not None:
            self.task_pool.resume_at(step)
        self.spent = Spent(**spent) if spent else Spent()

    def step(self, policy, step: int, handed: list[str]) -> StepBatch:
        """Step ``step``'s successes, sampled from ``policy``; ``handed``: the trainer's ids."""
        import time

        started, p = time.time(), self.plan
        wanted = self._first_draw(step, handed)
        kept: list[list[Episode]] = []
        tried: set[str] = set()
        candidates = list(wanted)
        rounds = p.max_resample_rounds + 1 if p.drop_all_failed else 1
        for round_ in range(rounds):
            groups = self._sample(policy, candidates, step, round_)
            tried |= set(candidates)
            for group in groups:
                self._record(step, round_, group)
                if any(e.score["success"] for e in group):
                    if len(kept) < len(wanted):
                        kept.append(group)
                else:
                    self.spent.prompts_dropped += 1
            missing = len(wanted) - len(kept)
            if not missing or round_ == rounds - 1:
                break
            candidates = self._refill(missing * 2, step, round_ + 1, tried)
            if not candidates:
                break
        rows = self._rows([e for group in kept for e in group], step)
        self.spent.steps = step + 1
        self.spent.updates += bool(rows)
        self.spent.successes_trained += len(rows)
        self.spent.tokens_trained += sum(sum(mask) for _, _, mask in rows)
        self.spent.rollout_s += time.time() - started
        if self.task_pool is not None:
            self.task_pool.save()
        return StepBatch(rows)

    def _first_draw(self, step: int, handed: list[str]) -> list[str]:
        n = self.plan.prompts_per_step
        if self.task_pool is not None:
            return self.task_pool.draw(n, step, 0)
        if len(self.envs) > 1:
            rng = random.Random(f"{self.plan.seed}-{step}-mix")
            return draw_tasks(self.env_pools, self.weights, n, rng)
        return list(handed[:n])

    def _refill(self, n: int, step: int, round_: int, tried: set[str]) -> list[str]:
        if self.task_pool is not None:
            return self.task_pool.draw(n, step, round_, tried)
        rng = random.Random(f"{self.plan.seed}-{step}-{round_}")
        if len(self.envs) > 1:
            return draw_tasks(self.env_pools, self.weights, n, rng, tried)
        left = [t for t in self.pool_ids if t not in tried]
        return rng.sample(left, min(n, len(left)))

    def _record(self, step: int, round_: int, group: list[Episode]) -> None:
        self.spent.prompts_drawn += 1
        self.spent.samples_generated += len(group)
        self.spent.tokens_generated += sum(sum(e.env_mask) for e in group)
        self.spent.successes_found += sum(bool(e.score["success"]) for e in group)
        if self.task_pool is not None:
            self.task_pool.record(
                step, round_, group[0].task.task_id,
                [e.score["success"] for e in group], [e.reward for e in group],
            )  # fmt: skip

    def _sample(self, policy, task_ids: list[str], step: int, round_: int) -> list[list[Episode]]:
        """``k`` episodes of each task, grouped by task in order; an episode the environment or
        the backend could not finish fails the step (its reward says nothing about the policy)."""
        k = self.plan.samples_per_prompt
        tasks = [self.by_id[t] for t in task_ids]
        planned = plan(tasks, self.run_id, step, k, self.plan.seed, round_)
        sampling = Sampling(
            max_new_tokens=self.plan.max_new_tokens, temperature=self.plan.temperature
        )
        results: dict[str, tuple[Episode | None, GymflowError | None]] = {}
        turns = ModelTurns(policy, sampling)

        async def go() -> None:
            by_env: dict[str, list[Planned]] = {}
            for p in planned:
                name = p.task.env if len(self.envs) > 1 else next(iter(self.envs))
                by_env.setdefault(name, []).append(p)

            async def one_env(name: str, todo: list[Planned]) -> None:
                env, app = self.envs[name]
                async with EnvClient(app=app) as client:
                    await run_window(
                        client, env, turns, todo, len(todo),
                        lambda p, ep, err: results.__setitem__(p.rollout_id, (ep, err)),
                    )  # fmt: skip

            await asyncio.gather(*(one_env(n, todo) for n, todo in by_env.items()))

        self.loop.run_until_complete(go())
        episodes = []
        for p in planned:
            ep, error = results[p.rollout_id]
            if error is not None:
                raise error
            if ep.policy_failed:
                kind = FailureKind(ep.score["failure_kind"])
                raise GymflowError(kind, f"RFT sampling: {ep.score['detail']}")
            episodes.append(ep)
        return [episodes[i : i + k] for i in range(0, len(episodes), k)]

    def _rows(self, episodes: list[Episode], step: int) -> list[Row]:
        """The successes as token rows, each distinct completion of a task once, at most
        ``batch_size`` (a seeded draw when more)."""
        rows, seen = [], set()
        for e in episodes:
            key = (e.task.task_id, tuple(e.completion_ids))
            if e.score["success"] and e.has_token_view and any(e.env_mask) and key not in seen:
                seen.add(key)
                rows.append((list(e.prompt_ids), list(e.completion_ids), list(e.env_mask)))
        if len(rows) > self.plan.batch_size:
            rng = random.Random(f"{self.plan.seed}-{step}-successes")
            rows = rng.sample(rows, self.plan.batch_size)
        return rows
