"""The rollout engine: G samples per task, many episodes live at once, appended to Parquet.

``collect_rollouts`` plans every (task, sample) of a collection, skips those already on disk,
and runs the rest in chunks of ``concurrency`` live episodes through
:func:`gymflow.agent_loop.run_episodes`, so each model turn is one batched generation across
the chunk (token backends) or one round of concurrent requests (message backends). Every env
and policy call has its own timeout and capped retries (:class:`~gymflow.env_client.EnvClient`,
the openai backend).

Each finished chunk is appended as one validated part file (``OUT/rollouts/part-*.parquet``,
temp file + rename). Rollout ids come from (run id, iteration, task id, sample index), so a
collection killed at any point and run again with the same run id collects exactly the
missing rollouts: none lost, none twice. What is not covered: two collectors writing the same
folder at once, and retrying rows that failed (they are final for their run id; collect again
under a new run id).

A chunk that raises (env down, a tool call the server refuses) is re-run one episode at a time
so the healthy episodes finish; each one that still fails becomes a row with reward null and
the error's ``failure_kind`` (``env_unavailable``, ``policy_unavailable`` ...), never a silent
reward 0. Bugs (any exception that is not a ``GymflowError``) stop the collection; parts
already written stay and a re-run resumes after them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gymflow.agent_loop import Episode, Sampling, run_episodes
from gymflow.env_client import EnvClient
from gymflow.environment import Environment
from gymflow.failures import FailureKind, GymflowError
from gymflow.policy import ChatPolicy, Policy
from gymflow.rollout_store import (
    Lineage,
    collected_row,
    group_id_of,
    read_parts,
    rollout_id,
    write_part,
)
from gymflow.schemas import collected_rollouts
from gymflow.task_record import Task
from gymflow.task_table import dataset_hash, write_tasks

ROLLOUTS_DIR = "rollouts"


@dataclass(frozen=True)
class CollectSettings:
    run_id: str
    """Names the collection; the same id resumes it."""
    num_repeats: int = 4
    """G: samples per task (one group)."""
    concurrency: int = 32
    """Episodes live at once; also the rows per part file."""
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
    parts: list[str]
    wall_s: float
    rollouts_per_s: float
    tokens_per_s: float
    """Model (sampled) tokens per second; 0 for message backends that return no ids."""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Planned:
    task: Task
    sample_idx: int
    rollout_id: str
    seed: int


def plan(tasks: list[Task], settings: CollectSettings) -> list[Planned]:
    """Every (task, sample) of the collection, task-major so a group tends to share a chunk."""
    out = []
    for task in tasks:
        group_id = group_id_of(settings.iteration, task.task_id)
        for k in range(settings.num_repeats):
            rid = rollout_id(settings.run_id, settings.iteration, group_id, k)
            out.append(Planned(task, k, rid, settings.seed + int(rid[:7], 16)))
    return out


async def collect_rollouts(
    env: Environment,
    client: EnvClient,
    policy: Policy | ChatPolicy,
    tasks: list[Task],
    out_dir: Path,
    settings: CollectSettings,
) -> CollectReport:
    """Collect the rollouts of ``tasks`` × G not yet under ``out_dir``; see the module doc."""
    started = time.time()
    if len({t.task_id for t in tasks}) != len(tasks):
        raise GymflowError(FailureKind.BAD_REQUEST, "task ids must be unique in a collection")
    folder = out_dir / ROLLOUTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lineage = Lineage(
        settings.run_id, settings.iteration, settings.policy_version, settings.policy_spec,
        env.name, env.version, dataset_hash(tasks),
    )  # fmt: skip
    done = _ids_on_disk(folder, lineage)
    write_tasks(tasks, out_dir / "tasks.parquet")  # exports read the tasks back from here
    schema = collected_rollouts(settings.num_repeats, settings.reward_range)
    planned = plan(tasks, settings)
    todo = [p for p in planned if p.rollout_id not in done]
    parts: list[str] = []
    kinds: Counter[str] = Counter()
    unscored = tokens = 0
    with _progress(len(planned), len(planned) - len(todo), settings.progress) as bar:
        for start in range(0, len(todo), settings.concurrency):
            chunk = todo[start : start + settings.concurrency]
            results = await _run_chunk(client, env, policy, chunk, settings.sampling)
            rows = [
                collected_row(lineage, p.task, p.sample_idx, p.seed, ep, err)
                for p, (ep, err) in zip(chunk, results, strict=True)
            ]
            parts.append(str(write_part(rows, folder, schema, settings.iteration)))
            kinds.update(r["failure_kind"] for r in rows if r["failure_kind"])
            unscored += sum(r["reward"] is None for r in rows)
            tokens += sum(sum(ep.env_mask) for ep, _ in results if ep is not None)
            bar.advance(len(rows), tokens, time.time() - started)
    wall = time.time() - started
    return CollectReport(
        run_id=settings.run_id,
        planned=len(planned),
        already_on_disk=len(planned) - len(todo),
        collected=len(todo),
        failures=dict(kinds),
        unscored=unscored,
        parts=parts,
        wall_s=round(wall, 3),
        rollouts_per_s=round(len(todo) / wall, 2) if wall else 0.0,
        tokens_per_s=round(tokens / wall, 1) if wall else 0.0,
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
) -> CollectReport:
    """``collect_rollouts`` with its client: the env in-process, or the server at ``env_url``.

    Also writes the report to ``OUT/collect.json``.
    """
    from gymflow.resources_server import build_app

    async def go() -> CollectReport:
        if env_url:
            client = EnvClient(base_url=env_url, timeout_s=env_timeout_s, retries=env_retries)
        else:
            client = EnvClient(app=build_app(env), timeout_s=env_timeout_s, retries=env_retries)
        async with client:
            return await collect_rollouts(env, client, policy, tasks, out_dir, settings)

    report = asyncio.run(go())
    (out_dir / "collect.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return report


def _ids_on_disk(folder: Path, lineage: Lineage) -> set[str]:
    """Ids already collected; refuses a folder that holds another run's or dataset's rows."""
    existing = read_parts(folder)
    if existing.is_empty():
        return set()
    for column, mine in (("run_id", lineage.run_id), ("dataset_hash", lineage.dataset_hash)):
        theirs = sorted(set(existing[column].to_list()) - {mine})
        if theirs:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"{folder} holds rollouts with {column} {theirs[0]!r}, not {mine!r}: resume "
                "that collection with the same run id and tasks, or collect into another folder",
            )
    return set(existing["rollout_id"].to_list())


async def _run_chunk(
    client: EnvClient,
    env: Environment,
    policy: Policy | ChatPolicy,
    chunk: list[Planned],
    sampling: Sampling,
) -> list[tuple[Episode | None, GymflowError | None]]:
    """Episodes of the chunk in one lock-step batch; if that raises, one by one."""
    try:
        episodes = await run_episodes(
            client, env, policy, [p.task for p in chunk], sampling, [p.seed for p in chunk]
        )
        return [(ep, None) for ep in episodes]
    except GymflowError:
        pass

    async def one(p: Planned) -> tuple[Episode | None, GymflowError | None]:
        try:
            (ep,) = await run_episodes(client, env, policy, [p.task], sampling, [p.seed])
            return ep, None
        except GymflowError as exc:
            return None, exc

    return list(await asyncio.gather(*(one(p) for p in chunk)))


class _progress:
    """A rich progress bar on stderr with rollouts/s and tokens/s; silent off a terminal."""

    def __init__(self, total: int, done: int, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total, self.done, self.new = total, done, 0

    def __enter__(self) -> _progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), console=Console(stderr=True),
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("collect", total=self.total, completed=self.done, rate="")
        return self

    def advance(self, n: int, tokens: int, elapsed: float) -> None:
        self.done, self.new = self.done + n, self.new + n
        if self.enabled and elapsed > 0:
            rate = f"{self.new / elapsed:.1f} rollouts/s  {tokens / elapsed:.0f} tokens/s"
            self.bar.update(self.task, completed=self.done, rate=rate)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.stop()
