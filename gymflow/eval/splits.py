"""Where an evaluation's tasks come from: ``--split val|heldout|FILE`` (and ``--run``).

* ``val`` / ``heldout`` with a run folder (``--run RUN_ID``): that run's
  ``data/tasks-<split>.parquet``, the environment's rows of it — exactly what the run's
  baseline and held-out gate saw. An environment the run has no tasks of (a ``tool_call`` run
  also checked on ``math``) gets its regenerated split, and its source says so.
* ``val`` / ``heldout`` without a run: the environment's deterministic split, regenerated with
  the task settings of a default lifecycle run (:class:`GeneratedSplit`, filled by the caller
  from ``LifecycleConfig``'s defaults): the tasks are drafted from the same seed and split by
  the same content hash, so for a run made with the default task settings (``make run``) the
  held-out set is that run's own, task for task (when the run was made by this code: the
  split rule belongs to the code). A generated split is cached in the home's
  ``.cache/eval-splits/``, keyed by the environment, the settings and a digest of the code that
  drafts and splits tasks (the environment's package and ``gymflow.data``): the ``games``
  generator takes seconds.
* ``FILE``: a task file — a gymflow task table (``.parquet``, e.g. a run's
  ``data/tasks-heldout.parquet``; the environment's rows of it) or JSONL in ``fmt``: gymflow
  tasks, or any external format the environment imports (GSM8K, MATH-500, HumanEval, BFCL,
  WorkBench, NeMo Gym rows — :func:`gymflow.data.task_files.load_tasks`), read as is.
* ``bfcl:simple_python``, ``bfcl:live_simple``: a public benchmark's held-out set
  (:mod:`gymflow.data.data_catalog`), fetched from the package registry into the home's
  ``.cache/data/`` on first use and read by its environment's importer (``--format`` is the
  set's own).

Every miss is a one-line ``GymflowError`` naming the split, file or run and what to do.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.paths import cache_dir as home_cache
from gymflow.core.task_record import Task
from gymflow.data.data_catalog import SETS, names_a_set, set_tasks
from gymflow.data.task_files import load_tasks
from gymflow.data.task_set import build_tasks
from gymflow.data.task_table import read_tasks, write_tasks
from gymflow.env.environment import Environment

SPLIT_NAMES = ("val", "heldout")
CACHE_FOLDER = "eval-splits"


class GeneratedSplit(BaseModel):
    """The task settings a split is regenerated with (those of ``LifecycleConfig``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_tasks: int
    task_seed: int
    heldout_frac: float
    val_frac: float

    @classmethod
    def like(cls, config) -> GeneratedSplit:
        """The settings of a lifecycle config (any object with these four fields)."""
        return cls(**{name: getattr(config, name) for name in cls.model_fields})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class EvalTasks:
    tasks: list[Task]
    source: str
    """Where they came from, for the report (``heldout of run X``, ``file F (gsm8k)`` ...)."""


def eval_tasks(
    env: Environment,
    split: str,
    generated: GeneratedSplit,
    fmt: str = "gymflow",
    run_dir: Path | None = None,
    cache_dir: Path | None = None,
) -> EvalTasks:
    """The tasks of ``split`` for ``env`` (see the module docstring); never empty."""
    if split in SPLIT_NAMES:
        tasks = _of_env(env, _run_split(run_dir, split)) if run_dir is not None else []
        where = f"{split} of run {run_dir.name}" if run_dir is not None else ""
        if not tasks:
            tasks = _generated(env, split, generated, cache_dir)
            where = f"{split}, regenerated (default task settings)"
            if run_dir is not None:
                where += f"; run {run_dir.name} has no {env.name} tasks"
    elif names_a_set(split):
        tasks, where = set_tasks(env, split, cache_dir or home_cache()), f"external set {split}"
    else:
        path = Path(split)
        if not path.is_file():
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"--split {split}: no such file; give val, heldout, an external set "
                f"({', '.join(SETS)}) or a task file (.parquet task table, or JSONL in --format)",
            )
        if path.suffix == ".parquet":
            tasks, where = _of_env(env, read_tasks(path)), f"file {path}"
        else:
            tasks, where = list(load_tasks(env, path, fmt).values()), f"file {path} ({fmt})"
    if not tasks:
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"{where} holds no {env.name} tasks; pick another split"
        )
    return EvalTasks(tasks, where)


def _run_split(run_dir: Path, split: str) -> list[Task]:
    path = run_dir / "data" / f"tasks-{split}.parquet"
    if not path.is_file():
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{path} does not exist: is {run_dir} a run folder whose generate_tasks stage "
            "finished? (`gymflow run` writes it; leave out --run to regenerate the split)",
        )
    return read_tasks(path)


def _code_digest(env: Environment) -> str:
    """Digest of the sources that decide a generated split: the environment's package (its
    generator) and ``gymflow.data`` (dedup, split rule). ~1 ms."""
    import gymflow.data

    folders = [Path(inspect.getfile(type(env))).parent, Path(gymflow.data.__file__).parent]
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _of_env(env: Environment, tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if t.env == env.name]


def _generated(
    env: Environment, split: str, generated: GeneratedSplit, cache_dir: Path | None
) -> list[Task]:
    key = f"{env.name}-v{env.version}-{generated.digest()[:8]}-{_code_digest(env)[:8]}"
    cached = cache_dir / CACHE_FOLDER / f"{key}-{split}.parquet" if cache_dir else None
    if cached is not None and cached.is_file():
        return read_tasks(cached)
    g = generated
    tasks = build_tasks(env, g.n_tasks, g.task_seed, g.heldout_frac, g.val_frac)
    if cached is not None:
        for name in SPLIT_NAMES:
            write_tasks(
                [t for t in tasks if t.split == name], cached.with_name(f"{key}-{name}.parquet")
            )
    return [t for t in tasks if t.split == split]
