"""The rollout store: one row builder, one writer, one reader for every rollout the product makes.

GRPO's rollout batches, evaluations and collections all land in the same layout: a folder
``OUT/`` holding ``tasks.parquet`` (the tasks, so exports can rebuild prompts) and
``rollouts/part-<iteration>-<n>.parquet``, validated part files written atomically (temp file
+ rename). A row carries its lineage (:class:`Lineage`: run, iteration, policy version and
spec, environment and version, task-data hash) and its own ids: a rollout id is deterministic
from (run, iteration, group, sample), and a sampling seed from (base seed, group, sample), so
re-running an iteration rewrites the same ids with the same seeds instead of adding new ones,
and a resumed collection knows which rollouts are already on disk.
:func:`read_rollouts` reads any such folder (a lifecycle run folder, its ``rollouts/``, a
collection or an evaluation folder).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandera.polars as pa
import polars as pl

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.core.trajectory import prompt_items
from gymflow.data.schemas import ROLLOUT_ATTEMPTS, ROLLOUTS, read_table, validate, write_table
from gymflow.rollout.episode import Episode


def rollout_id(run_id: str, iteration: int, group_id: str, sample_idx: int) -> str:
    blob = f"{run_id}/{iteration}/{group_id}/{sample_idx}"
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


ROLLOUTS_DIR = "rollouts"
PART_GLOB = "part-*.parquet"


@dataclass(frozen=True)
class Lineage:
    """What every row of one collection shares: who produced it, from what, for which run."""

    run_id: str
    iteration: int
    policy_version: int
    policy: str
    """The policy spec string (``transformers:PATH``, ``openai:URL?model=M`` ...)."""
    env: str
    env_version: str
    dataset_hash: str


def group_id_of(iteration: int, task_id: str, round_: int = 0) -> str:
    """A group is the G samples of one task in one iteration (and one resampling round:
    GRPO's dynamic sampling may draw a task again in a later round of the same step)."""
    return f"{iteration}-{task_id}" if round_ == 0 else f"{iteration}-r{round_}-{task_id}"


def sample_seed(base: int, group_id: str, sample_idx: int) -> int:
    """A rollout's sampling seed: the same for the same (base, group, sample), whatever the run
    id, so a run re-done under another id (or resumed) samples what the first one did."""
    digest = hashlib.sha256(f"{group_id}/{sample_idx}".encode()).hexdigest()
    return base + int(digest[:7], 16)


@dataclass(frozen=True)
class Planned:
    """One rollout to make: its task, sample index, ids and seed."""

    task: Task
    sample_idx: int
    group_id: str
    rollout_id: str
    seed: int
    attempt: int = 0


def plan(
    tasks: list[Task], run_id: str, iteration: int, repeats: int, seed: int, round_: int = 0
) -> list[Planned]:
    """Every (task, sample) of one iteration, task-major (a group's samples are neighbours).

    A task listed twice gets a second group (``#1`` appended to its group id).
    """
    out, seen = [], Counter()
    for task in tasks:
        group_id = group_id_of(iteration, task.task_id, round_)
        seen[task.task_id] += 1
        if seen[task.task_id] > 1:  # the same task twice in one batch: two groups
            group_id += f"#{seen[task.task_id] - 1}"
        for k in range(repeats):
            rid = rollout_id(run_id, iteration, group_id, k)
            out.append(Planned(task, k, group_id, rid, sample_seed(seed, group_id, k)))
    return out


def rollout_row(
    lineage: Lineage,
    planned: Planned,
    episode: Episode | None,
    error: GymflowError | None = None,
    used_for_training: bool = False,
) -> dict:
    """The one row of one rollout; ``episode`` None (with ``error``) for one that never finished.

    A rollout without a verdict (the env or the policy failed) gets reward null, success
    False and the failure's kind and message: it is kept, never counted as a reward of 0.
    """
    task = planned.task
    row = {
        "rollout_id": planned.rollout_id,
        "run_id": lineage.run_id,
        "iteration": lineage.iteration,
        "policy_version": lineage.policy_version,
        "env": lineage.env,
        "env_version": lineage.env_version,
        "task_id": task.task_id,
        "group_id": planned.group_id,
        "sample_idx": planned.sample_idx,
        "dataset_hash": lineage.dataset_hash,
        "policy": lineage.policy,
        "seed": planned.seed,
        "attempt": planned.attempt,
    }
    if episode is None:
        if error is None:
            raise ValueError("a rollout row needs an episode or the error that stopped it")
        return {
            **row,
            "trajectory": json.dumps(prompt_items(task.prompt), ensure_ascii=False),
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "reward": None,
            "reward_components": "{}",
            "success": False,
            "failure_kind": str(error.kind),
            "failure_detail": error.detail,
            "used_for_training": False,
            "turns": 0,
            "tool_calls": 0,
            "tokens": 0,
            "latency_s": 0.0,
            "started_at": 0.0,
        }
    score = episode.score
    return {
        **row,
        "trajectory": json.dumps(episode.items, ensure_ascii=False),
        "prompt_ids": episode.prompt_ids,
        "completion_ids": episode.completion_ids,
        "logprobs": episode.logprobs,
        "env_mask": episode.env_mask,
        # a policy failure's score is a placeholder, not a verdict
        "reward": None if episode.policy_failed else float(score["reward"]),
        "reward_components": json.dumps(score.get("components", {})),
        "success": bool(score["success"]) and not episode.policy_failed,
        "failure_kind": score.get("failure_kind"),
        "failure_detail": score.get("detail") if score.get("failure_kind") else None,
        "used_for_training": used_for_training,
        "turns": episode.turns,
        "tool_calls": episode.tool_calls,
        "tokens": len(episode.prompt_ids) + len(episode.completion_ids),
        "latency_s": float(episode.latency_s),
        "started_at": float(episode.started_at),
    }


class RolloutWriter:
    """Rows of one rollout folder, buffered and appended as validated part files.

    ``add`` buffers a row and writes a part once ``chunk`` rows wait; ``flush`` writes the
    rest. A write that fails (disk full, a row the schema refuses) raises; the rows of earlier
    parts stay intact and readable. With ``background`` parts are validated and written in one
    writer thread, so the caller's next work overlaps the write (GRPO trains on a batch while
    its rows are stored: validating a 32-row part costs ~45 ms, a fifth of a small step); a
    background write's error is raised by the next :meth:`wait`.
    """

    def __init__(
        self, out_dir: Path, schema: pa.DataFrameSchema, chunk: int, background: bool = False
    ) -> None:
        self.folder = Path(out_dir) / ROLLOUTS_DIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self.schema, self.chunk = schema, max(1, chunk)
        self.buffer: list[dict] = []
        self.parts: list[str] = []
        self._thread = ThreadPoolExecutor(1, "rollout-writer") if background else None
        self._pending: list[Future] = []

    def add(self, row: dict) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as a part; with ``background``, in the writer's thread (in
        order) while the caller goes on: :meth:`wait` says when they are on disk."""
        rows, self.buffer = self.buffer, []  # emptied first: a failed write is not retried
        if not rows:
            return
        if self._thread is None:
            self._write(rows)
        else:
            self._pending.append(self._thread.submit(self._write, rows))

    def wait(self) -> None:
        """Block until every flushed part is on disk; raise the first write's error."""
        pending, self._pending = self._pending, []
        errors = [exc for future in pending if (exc := future.exception()) is not None]
        if errors:
            raise errors[0]

    def _write(self, rows: list[dict]) -> None:
        iteration = rows[0]["iteration"]
        self.parts.append(str(write_part(rows, self.folder, self.schema, iteration)))

    def drop_iterations_from(self, iteration: int) -> list[Path]:
        """Delete the parts of ``iteration`` and later (a training run resumed from a checkpoint
        taken before them makes those rollouts again, under the same ids)."""
        dropped = [
            part
            for part in sorted(self.folder.glob(PART_GLOB))
            if int(part.stem.split("-")[1]) >= iteration
        ]
        for part in dropped:
            part.unlink()
        return dropped


def rollouts_frame(rows: list[dict]) -> pl.DataFrame:
    """Rows as a frame with the ``ROLLOUTS`` dtypes (lists and nulls typed, not inferred)."""
    schema = {
        "prompt_ids": pl.List(pl.Int64),
        "completion_ids": pl.List(pl.Int64),
        "logprobs": pl.List(pl.Float64),
        "env_mask": pl.List(pl.Int64),
        "reward": pl.Float64,
        "failure_kind": pl.String,
        "failure_detail": pl.String,
        "policy": pl.String,
        "attempt": pl.Int64,
    }
    return pl.DataFrame(rows, schema_overrides=schema)


def write_part(rows: list[dict], folder: Path, schema: pa.DataFrameSchema, iteration: int) -> Path:
    """Append rows as the next part file, validated and atomic (temp file + rename)."""
    taken = [int(p.stem.rsplit("-", 1)[1]) for p in folder.glob(f"part-{iteration:04d}-*.parquet")]
    path = folder / f"part-{iteration:04d}-{max(taken, default=0) + 1:05d}.parquet"
    return write_table(rollouts_frame(rows), schema, path)


def read_parts(
    folder: Path, schema: pa.DataFrameSchema = ROLLOUTS, every_attempt: bool = False
) -> pl.DataFrame:
    """The rollouts under ``folder``: one row per rollout id, its latest attempt.

    Each part is validated; across parts, (rollout id, attempt) must be unique (a rollout
    retried with ``--retry-failed`` has a row per attempt; parts written before attempts were
    recorded count as attempt 0). ``every_attempt`` returns all rows, earlier attempts
    included (for audit). A damaged part raises ``GymflowError(CORRUPT_FILE)`` naming the file
    (delete it to collect its rollouts again); leftovers of writes a crash interrupted (hidden
    ``.tmp`` files) are not parts and are removed.
    """
    for stale in folder.glob(".part-*.tmp"):
        stale.unlink(missing_ok=True)
    paths = sorted(folder.glob(PART_GLOB))
    if not paths:
        return rollouts_frame([]).clear()
    df = _validated_parts(paths, schema)
    attempt = pl.col("attempt").fill_null(0) if "attempt" in df.columns else pl.lit(0)
    df = df.with_columns(attempt.cast(pl.Int64).alias("attempt"))
    df = validate(df, ROLLOUT_ATTEMPTS, str(folder))
    if every_attempt:
        return df
    latest = df.filter(pl.col("attempt") == pl.col("attempt").max().over("rollout_id"))
    return validate(latest, schema, str(folder))


def _validated_parts(paths: list[Path], schema: pa.DataFrameSchema) -> pl.DataFrame:
    """Every part's rows, each row valid under ``schema``.

    Validated in one pass over all the parts' rows, not part by part: pandera's fixed cost per
    call made a run's report spend ~10 s reading its ~200 GRPO parts. The one pass leaves out
    uniqueness (rows of several attempts share an id; the caller checks (id, attempt) across
    parts and the latest rows under the whole schema). Only when it fails are the parts
    validated one by one, so the error names the part at fault."""
    frames = [read_table(p) for p in paths]
    rows = schema.update_columns(  # a new schema: ``schema`` keeps its checks
        {name: {"unique": False} for name, column in schema.columns.items() if column.unique}
    )
    rows.unique = None
    alike: dict[frozenset, list[pl.DataFrame]] = {}  # parts of one layout (older parts lack
    for frame in frames:  # columns added since, e.g. ``attempt``: null there is not a violation)
        alike.setdefault(frozenset(frame.columns), []).append(frame)
    try:
        for group in alike.values():
            validate(pl.concat(group, how="diagonal_relaxed"), rows, "parts")
    except (GymflowError, pl.exceptions.PolarsError):
        for path, frame in zip(paths, frames, strict=True):
            validate(frame, schema, str(path))  # raises, naming the part
        raise
    return pl.concat(frames, how="diagonal_relaxed")


def rollout_folder(path: Path) -> Path:
    """The folder of part files for ``path``: a lifecycle run, collection or evaluation folder
    (holding ``rollouts/``), or that ``rollouts/`` folder itself."""
    path = Path(path)
    if (path / ROLLOUTS_DIR).is_dir():
        return path / ROLLOUTS_DIR
    if path.name == ROLLOUTS_DIR and path.is_dir():
        return path
    raise GymflowError(
        FailureKind.BAD_REQUEST,
        f"{path}: no rollouts here; give a run, collection or evaluation folder (one that "
        f"holds {ROLLOUTS_DIR}/), or its {ROLLOUTS_DIR}/ folder",
    )


def read_rollouts(path: Path, every_attempt: bool = False) -> pl.DataFrame:
    """The rollouts of any rollout folder (see :func:`rollout_folder`), latest attempts."""
    return read_parts(rollout_folder(path), every_attempt=every_attempt)


def tasks_file(path: Path) -> Path:
    """``tasks.parquet`` beside the ``rollouts/`` folder that :func:`rollout_folder` finds."""
    return rollout_folder(path).parent / "tasks.parquet"
