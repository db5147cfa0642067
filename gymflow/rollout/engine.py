"""The rollout engine: G samples per task, many episodes live at once, appended to Parquet.

``collect_rollouts`` plans every (task, sample) of a collection, skips those already on disk,
and runs the rest in a sliding window: at most ``concurrency`` episodes live
(:func:`gymflow.rollout.driver.run_episode`), the next planned one starting as soon as one ends, so
a slow episode (a long multi-turn one, a slow tool) holds only itself. Model turns are still
batched: a shared :class:`~gymflow.rollout.model_turns.ModelTurns` sends the turns of every episode
waiting for the model at that moment as one generation (token backends), or the requests
concurrently (message backends). Every env and policy call has its own timeout and capped
retries (:class:`~gymflow.env.client.EnvClient`, the openai backend).

Finished rows are buffered and appended ``concurrency`` at a time as validated part files
(``OUT/rollouts/part-*.parquet``, temp file + rename). Rollout ids come from (run id,
iteration, task id, sample index), so a collection killed at any point and run again with the
same run id collects exactly the missing rollouts: none lost, none twice (rows still in the
buffer at a kill are collected again). A second collector started on the same folder fails at
once with ``folder_busy`` (:mod:`gymflow.core.folder_lock`; the kernel drops the lock if the holder
dies).

``retry_failed`` also re-runs the rollouts whose latest row has no reward (an env or policy
fault: ``env_unavailable``, ``timeout`` ...; scored mistakes such as ``invalid_json`` are
verdicts and stay). A retry is a new row of the same rollout id and seed with ``attempt`` one
higher, in a new part file; the old rows stay on disk for audit, and every reader
(:func:`~gymflow.rollout.store.read_parts`, the exports) sees the latest attempt only.

An episode that raises a ``GymflowError`` (env down, a tool call the server refuses, a
generation that failed) becomes a row with reward null and the error's ``failure_kind``
(``env_unavailable``, ``policy_unavailable`` ...), never a silent reward 0; the others go on.
Bugs (any other exception) stop the collection: live episodes are cancelled, finished rows
are written, and a re-run resumes after them.

An :class:`EpisodeRunner` runs the episodes elsewhere (Ray workers,
:mod:`gymflow.rollout.ray_engine`): planning, rows, parts, lock and report stay here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pandera.polars as pa
import polars as pl

from gymflow.core import folder_lock
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import dataset_hash, write_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.policy.base import ChatPolicy, Policy
from gymflow.rollout.driver import OnDone, run_window
from gymflow.rollout.episode import Episode, Sampling
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.progress import RolloutProgress
from gymflow.rollout.store import (
    ROLLOUTS_DIR,
    Lineage,
    Planned,
    RolloutWriter,
    plan,
    read_parts,
    rollout_row,
)


@dataclass(frozen=True)
class CollectSettings:
    run_id: str
    """Names the collection; the same id resumes it."""
    num_repeats: int = 4
    """G: samples per task (one group)."""
    concurrency: int = 32
    """Episodes live at once; also the rows per part file."""
    retry_failed: bool = False
    """Also re-run rollouts whose latest row has reward null (see the module doc)."""
    batch_wait_s: float = 0.01
    """Longest a model turn waits for other episodes' turns to batch with (token backends)."""
    iteration: int = 0
    policy_version: int = 0
    policy_spec: str = ""
    """The spec the policy was loaded from, kept in every row."""
    seed: int = 0
    """Base of every rollout's sampling seed (each seed also depends on the rollout id)."""
    sampling: Sampling = field(default_factory=Sampling)
    reward_range: tuple[float, float] = (-1.0, 1.0)
    progress: bool | None = None
    """Progress bar on stderr; None: only when stderr is a terminal."""


@dataclass
class CollectReport:
    run_id: str
    planned: int
    already_on_disk: int
    collected: int
    failures: dict[str, int]
    """Rows of this call by ``failure_kind`` (scored mistakes and unscored faults alike)."""
    unscored: int
    """Rows of this call with no reward (env or policy faults)."""
    retried: int
    """Rollouts of this call that were retries of unscored rows (``retry_failed``)."""
    still_failed: int
    """Of those, how many got no reward again."""
    parts: list[str]
    wall_s: float
    rollouts_per_s: float
    tokens_per_s: float
    """Model (sampled) tokens per second; 0 for message backends that return no ids."""
    mean_batch: float
    """Mean model turns per generation call (token backends; 0 for message backends)."""
    engine: dict = field(default_factory=lambda: {"name": "local"})
    """Where the episodes ran: ``local``, or the runner's summary (Ray: workers, restarts)."""

    def as_dict(self) -> dict:
        return asdict(self)


class EpisodeRunner(Protocol):
    """Runs a collection's planned rollouts somewhere else than this process's window (Ray
    workers: :mod:`gymflow.rollout.ray_engine`)."""

    async def __call__(self, todo: list[Planned], on_done: OnDone) -> list[int]:
        """Run every rollout of ``todo``, calling ``on_done`` here for each as the window
        does; return the sizes of the generation calls made for them."""
        ...

    def summary(self) -> dict:
        """What the report says of the engine (name, workers, restarts ...)."""
        ...


def plan_collection(tasks: list[Task], settings: CollectSettings) -> list[Planned]:
    """Every (task, sample) of the collection (:func:`gymflow.rollout.store.plan`)."""
    return plan(tasks, settings.run_id, settings.iteration, settings.num_repeats, settings.seed)


async def collect_rollouts(
    env: Environment,
    client: EnvClient,
    policy: Policy | ChatPolicy,
    tasks: list[Task],
    out_dir: Path,
    settings: CollectSettings,
    runner: EpisodeRunner | None = None,
) -> CollectReport:
    """Collect the rollouts of ``tasks`` × G not yet under ``out_dir``; see the module doc.

    ``runner``: run the episodes there instead of in this process's window (``client`` and
    ``policy`` are then unused); planning, rows, parts and the report stay here.
    """
    started = time.time()
    if len({t.task_id for t in tasks}) != len(tasks):
        raise GymflowError(FailureKind.BAD_REQUEST, "task ids must be unique in a collection")
    folder = out_dir / ROLLOUTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lineage = Lineage(
        settings.run_id, settings.iteration, settings.policy_version, settings.policy_spec,
        env.name, env.version, dataset_hash(tasks),
    )  # fmt: skip
    with folder_lock.exclusive(out_dir):  # one writer: a second collector fails at once
        attempts, unscored = _on_disk(folder, lineage)
        write_tasks(tasks, out_dir / "tasks.parquet")  # exports read the tasks back from here
        schema = collected_rollouts(settings.num_repeats, settings.reward_range)
        planned = plan_collection(tasks, settings)
        missing = [p for p in planned if p.rollout_id not in attempts]
        retries = [
            replace(p, attempt=attempts[p.rollout_id] + 1)
            for p in planned
            if settings.retry_failed and p.rollout_id in unscored
        ]
        todo = missing + retries
        window = _Window(out_dir, schema, lineage, settings, len(planned), len(planned) - len(todo))
        turns = ModelTurns(policy, settings.sampling, settings.batch_wait_s)
        with window.bar:
            try:
                if runner is None:
                    await run_window(client, env, turns, todo, settings.concurrency, window.add)
                else:
                    turns.batches = await runner(todo, window.add)
            finally:
                window.writer.flush()  # finished rows are valid whatever stopped the rest
    wall = time.time() - started
    return CollectReport(
        run_id=settings.run_id,
        planned=len(planned),
        already_on_disk=len(planned) - len(missing),
        collected=len(todo),
        failures=dict(window.kinds),
        unscored=window.unscored,
        retried=len(retries),
        still_failed=window.retries_unscored,
        parts=window.writer.parts,
        wall_s=round(wall, 3),
        rollouts_per_s=round(len(todo) / wall, 2) if wall else 0.0,
        tokens_per_s=round(window.tokens / wall, 1) if wall else 0.0,
        mean_batch=round(sum(turns.batches) / len(turns.batches), 2) if turns.batches else 0.0,
        engine=runner.summary() if runner is not None else {"name": "local"},
    )


def collect(
    env: Environment,
    policy: Policy | ChatPolicy,
    tasks: list[Task],
    out_dir: Path,
    settings: CollectSettings,
    env_url: str | None = None,
    env_timeout_s: float = 30.0,
    env_retries: int = 3,
    runner: EpisodeRunner | None = None,
) -> CollectReport:
    """``collect_rollouts`` with its client: the env in-process, or the server at ``env_url``.

    Also writes the report to ``OUT/collect.json``.
    """

    async def go() -> CollectReport:
        async with env_client(env, env_url, env_timeout_s, env_retries) as client:
            return await collect_rollouts(env, client, policy, tasks, out_dir, settings, runner)

    report = asyncio.run(go())
    (out_dir / "collect.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return report


def env_client(
    env: Environment, env_url: str | None = None, timeout_s: float = 30.0, retries: int = 3
) -> EnvClient:
    """A client of ``env``: in-process (its app built here, no sockets), or the server at
    ``env_url``."""
    from gymflow.env.resources_server import build_app

    if env_url:
        return EnvClient(base_url=env_url, timeout_s=timeout_s, retries=retries)
    return EnvClient(app=build_app(env), timeout_s=timeout_s, retries=retries)


def _on_disk(folder: Path, lineage: Lineage) -> tuple[dict[str, int], set[str]]:
    """Each collected id's latest attempt, and the ids whose latest row has no reward.

    Refuses a folder that holds another run's or dataset's rows.
    """
    existing = read_parts(folder)
    if existing.is_empty():
        return {}, set()
    for column, mine in (("run_id", lineage.run_id), ("dataset_hash", lineage.dataset_hash)):
        theirs = sorted(set(existing[column].to_list()) - {mine})
        if theirs:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"{folder} holds rollouts with {column} {theirs[0]!r}, not {mine!r}: resume "
                "that collection with the same run id and tasks, or collect into another folder",
            )
    attempts = dict(zip(existing["rollout_id"], existing["attempt"], strict=True))
    unscored = set(existing.filter(pl.col("reward").is_null())["rollout_id"])
    return attempts, unscored


class _Window:
    """Finished rows of a collection: built, handed to the writer, counted, shown."""

    def __init__(
        self,
        out_dir: Path,
        schema: pa.DataFrameSchema,
        lineage: Lineage,
        settings: CollectSettings,
        planned: int,
        on_disk: int,
    ) -> None:
        self.lineage = lineage
        self.writer = RolloutWriter(out_dir, schema, settings.concurrency)
        self.bar = RolloutProgress(planned, on_disk, settings.progress)
        self.started = time.time()
        self.kinds: Counter[str] = Counter()
        self.unscored = self.retries_unscored = self.tokens = 0

    def add(self, p: Planned, episode: Episode | None, error: GymflowError | None) -> None:
        row = rollout_row(self.lineage, p, episode, error)
        self.writer.add(row)
        if row["failure_kind"]:
            self.kinds[row["failure_kind"]] += 1
        self.unscored += row["reward"] is None
        self.retries_unscored += row["reward"] is None and p.attempt > 0
        self.tokens += sum(episode.env_mask) if episode is not None else 0
        self.bar.advance(1, self.tokens, time.time() - self.started)
