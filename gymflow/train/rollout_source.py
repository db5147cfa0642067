"""The ``rollout_func`` TRL calls each generation step: tasks, episodes, storage, the batch.

TRL hands :class:`RolloutSource` the step's prompts (task ids, already repeated G times) and
takes back tokens, sampling logprobs, ``env_mask`` and the verifier's reward as an extra column.
In between, a step

1. picks its tasks (the ids TRL drew, or the difficulty pool's or the mix's pick, as many);
2. fills its batch through :class:`~gymflow.train.dynamic_sampling.DynamicSampler`, each round
   planned by :func:`gymflow.rollout.store.plan` (a seed per row: a resumed run samples what
   the first would have) and run by the run's :mod:`back end <gymflow.train.rollout_backends>`;
3. writes every rollout of the step — the groups trained on and those dynamic sampling dropped,
   ``used_for_training`` telling which — through the one store as
   ``out_dir/rollouts/part-<step>-*.parquet`` with ``lineage`` (iteration and policy version:
   the step), while the step trains on it;
4. hands ``on_batch(episodes, used, step)`` the same batch (the stage logs its metrics).

Several environments (``mix``: ``{name: (environment, app)}`` beside ``env``, ``weights`` per
name): tasks are drawn by weight, each scored by its own environment, each row naming it; a
group is the G samples of one task, so it never mixes environments. Several training processes:
each runs its share of a round and every process sees every result; rank 0 writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gymflow.core.failures import GymflowError
from gymflow.core.task_record import Task
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import write_tasks
from gymflow.env.environment import Environment
from gymflow.rollout.driver import training_batch
from gymflow.rollout.episode import Episode
from gymflow.rollout.store import Lineage, Planned, RolloutWriter, plan, rollout_row
from gymflow.train.distributed import gather, is_main, shard
from gymflow.train.dynamic_sampling import DynamicSampler
from gymflow.train.grpo_settings import GRPOSettings
from gymflow.train.rollout_backends import rollout_backend
from gymflow.train.success_replay import SuccessReplay
from gymflow.train.task_pool import TaskPool


class RolloutSource:
    """GRPO's ``rollout_func`` (see the module docstring). ``task_pool`` hands in a pool built
    elsewhere (the curriculum's, :mod:`gymflow.train.curriculum`); with
    ``task_sampling="difficulty"`` one is made otherwise, its ledger ``pool_file`` (kept across
    a resume)."""

    def __init__(
        self,
        env: Environment,
        app,
        pool: list[Task],
        settings: GRPOSettings,
        out_dir: Path | None = None,
        lineage: Lineage | None = None,
        on_batch: Callable[[list[Episode], list[bool], int], None] | None = None,
        pool_file: Path | None = None,
        mix: dict[str, tuple[Environment, object]] | None = None,
        weights: dict[str, float] | None = None,
        task_pool: TaskPool | None = None,
    ) -> None:
        self.env, self.settings, self.on_batch = env, settings, on_batch
        self.envs = {env.name: (env, app)} | dict(mix or {})
        self.by_id = {t.task_id: t for t in pool}
        self.pool_ids = [t.task_id for t in pool]
        self.task_pool = None
        if settings.task_sampling == "difficulty":
            self.task_pool = task_pool or TaskPool(
                self.pool_ids, settings.task_pool, settings.seed, pool_file
            )
        self.sampler = DynamicSampler(
            settings.dynamic_sampling, settings.max_resample_rounds, settings.seed,
            self.pool_ids, {name: [t.task_id for t in pool if t.env == name] for name in self.envs},
            dict(weights or dict.fromkeys(self.envs, 1.0)), self.task_pool,
        )  # fmt: skip
        self.replay = None  # the verified successes demo_loss imitates, when it asks for them
        if settings.demo_loss is not None and settings.demo_loss.success_share > 0:
            self.replay = SuccessReplay(settings.seed)
        self.lineage = lineage or Lineage("grpo", 0, 0, "grpo", env.name, env.version, "")
        self.writer = None
        if out_dir is not None and is_main():  # several processes: rank 0 writes every row
            ranges = [e.reward_range for e, _ in self.envs.values()]
            span = (min(r[0] for r in ranges), max(r[1] for r in ranges))
            schema = collected_rollouts(settings.num_generations, span)
            # one part per step, written while the step trains on it (run_grpo waits at step end)
            self.writer = RolloutWriter(out_dir, schema, chunk=1 << 30, background=True)
            write_tasks(pool, Path(out_dir) / "tasks.parquet")  # exports rebuild prompts
        self.loop = asyncio.new_event_loop()
        self.backend = rollout_backend(settings, self.envs)
        self.rollout_s = 0.0

    @property
    def stats(self) -> dict:
        """Dynamic sampling's counters and the seconds spent rolling out (the run summary's)."""
        return {**self.sampler.stats, "rollout_s": self.rollout_s}

    def close(self) -> None:
        """Stop what the back end started: Ray workers, a vLLM engine, the agents' proxy."""
        self.backend.close()

    def wait_stored(self) -> None:
        """Block until every rollout handed to the store is on disk (raise a write's error)."""
        if self.writer is not None:
            self.writer.wait()

    def resume_at(self, step: int) -> None:
        """Training restarts at ``step``: rollouts stored for it and later are made again."""
        if self.writer is not None:
            self.writer.drop_iterations_from(step)
        if self.task_pool is not None:
            self.task_pool.resume_at(step)
        if self.replay is not None:
            self.replay.resume_at(step, self.writer.folder if self.writer is not None else None)

    def __call__(self, prompts: list[str], trainer) -> dict:
        started = time.time()
        g = trainer.num_generations
        step = trainer.state.global_step
        asked = [prompts[i] for i in range(0, len(prompts), g)]
        asked = [t for part in gather(asked) for t in part]  # every process's, in rank order
        wanted = self.sampler.first_tasks(asked, step)
        policy = self.backend.policy(trainer)
        filled = self.sampler.fill(
            wanted, g, step, lambda ids, round_: self._run_round(policy, ids, g, step, round_)
        )
        chosen = {id(e) for group in filled.kept for e in group}
        self._store(filled.done, chosen, step)
        if self.replay is not None and not filled.failed:
            self.replay.record(step, [ep for _, ep, _ in filled.done])
        if self.task_pool is not None and is_main():
            self.task_pool.save()
        if filled.failed:
            self.wait_stored()  # the failure rows are on disk before the step fails
            raise filled.failed[0]
        self.rollout_s += time.time() - started
        if self.on_batch is not None and is_main():
            episodes = [ep for _, ep, _ in filled.done]
            self.on_batch(episodes, [id(e) in chosen for e in episodes], step)
        return training_batch([e for group in shard(filled.kept) for e in group])  # this rank's

    def _run_round(
        self, policy, task_ids: list[str], g: int, step: int, round_: int
    ) -> list[tuple[Planned, Episode | None, GymflowError | None]]:
        # Seeds depend on (seed, step, round, task, sample) only: a resumed run samples what
        # the first would have.
        tasks = [self.by_id[t] for t in task_ids]
        everyone = plan(tasks, self.lineage.run_id, step, g, self.settings.seed, round_)
        results: list[tuple[Planned, Episode | None, GymflowError | None]] = []
        mine = shard(everyone)  # several processes: each runs its share, all see every result
        self.loop.run_until_complete(
            self.backend.run(policy, mine, lambda p, ep, err: results.append((p, ep, err)))
        )
        results = [r for part in gather(results) for r in part]
        order = {p.rollout_id: i for i, p in enumerate(everyone)}
        return sorted(results, key=lambda r: order[r[0].rollout_id])

    def _store(self, done, chosen: set[int], step: int) -> None:
        if self.writer is None:
            return
        lineage = replace(self.lineage, iteration=step, policy_version=step)
        for p, ep, error in done:
            mine = lineage
            if len(self.envs) > 1:  # a mix: the row names its task's environment
                env = self.envs[p.task.env][0]
                mine = replace(lineage, env=env.name, env_version=env.version)
            self.writer.add(rollout_row(mine, p, ep, error, id(ep) in chosen))
        self.writer.flush()
