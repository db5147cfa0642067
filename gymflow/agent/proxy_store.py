"""Where the capturing proxy's episodes land: rollout rows in the one store.

A proxy started with ``--out DIR`` plans each episode it opens as the rollout engine plans a
collection's (:mod:`gymflow.rollout.store`): the group is the task (``group_id_of``), the
sample index counts that task's episodes (continuing after the rows already in ``DIR``), the
rollout id and the sampling seed follow from them, so the rows read like any other
collection's (``gymflow rollouts export --in DIR``, GRPO, evaluation reports). Rows are
buffered and written ``chunk`` at a time as validated part files, and the rest at
:meth:`ProxyStore.flush` (the proxy's shutdown); ``tasks.parquet`` beside them holds every task
an episode used.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gymflow.agent.capture import Capture
from gymflow.core.failures import GymflowError
from gymflow.core.task_record import Task
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import read_tasks, write_tasks
from gymflow.rollout.episode import Episode
from gymflow.rollout.store import (
    Lineage,
    Planned,
    RolloutWriter,
    group_id_of,
    read_parts,
    rollout_id,
    rollout_row,
    sample_seed,
)

MAX_GROUP = 1 << 30
"""Samples per task the schema allows (a proxy does not know its group size in advance)."""


class ProxyStore:
    def __init__(
        self, out_dir: Path, run_id: str, policy: str, seed: int = 0, chunk: int = 16
    ) -> None:
        self.out_dir, self.run_id, self.policy, self.seed = Path(out_dir), run_id, policy, seed
        self.writer = RolloutWriter(self.out_dir, collected_rollouts(MAX_GROUP, (-1.0, 1.0)), chunk)
        existing = read_parts(self.writer.folder)
        self.taken: Counter[str] = Counter()
        if not existing.is_empty():
            for group, idx in zip(existing["group_id"], existing["sample_idx"], strict=True):
                self.taken[group] = max(self.taken[group], idx + 1)
        tasks_path = self.out_dir / "tasks.parquet"
        self.tasks = {t.task_id: t for t in read_tasks(tasks_path)} if tasks_path.exists() else {}
        self._planned: dict[str, Planned] = {}
        self.rows = 0

    def plan(self, task: Task, seed: int | None = None) -> Planned:
        """The next rollout of ``task`` (its seed from the plan unless ``seed`` is given)."""
        group = group_id_of(0, task.task_id)
        idx = self.taken[group]
        self.taken[group] += 1
        rid = rollout_id(self.run_id, 0, group, idx)
        return Planned(
            task, idx, group, rid, sample_seed(self.seed, group, idx) if seed is None else seed
        )

    def opened(self, capture: Capture, planned: Planned) -> None:
        self._planned[capture.episode_id] = planned
        self.tasks[capture.task.task_id] = capture.task

    def add(self, capture: Capture, episode: Episode | None, error: GymflowError | None) -> None:
        planned = self._planned.pop(capture.episode_id)
        task = capture.task
        from gymflow.env.registry import get_env

        version = get_env(task.env).version
        lineage = Lineage(self.run_id, 0, 0, self.policy, task.env, version, "")
        self.writer.add(rollout_row(lineage, planned, episode, error))
        self.rows += 1
        if not self.writer.buffer:  # a part was just written: its tasks go beside it
            write_tasks(list(self.tasks.values()), self.out_dir / "tasks.parquet")

    def flush(self) -> None:
        self.writer.flush()
        if self.tasks:
            write_tasks(list(self.tasks.values()), self.out_dir / "tasks.parquet")
