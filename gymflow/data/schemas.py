"""Parquet tables and their pandera schemas (polars backend): tasks, rollouts, eval rows.

``write_table`` validates before writing; ``read_table`` validates after reading and turns
both unreadable files and schema violations into ``GymflowError`` whose message names the
file, the columns and the offending rows, so a bad file is refused with a reason, never
half-used.
"""

from __future__ import annotations

import errno
import json
import uuid
from pathlib import Path

import pandera.polars as pa
import polars as pl

from gymflow.core.failures import FailureKind, GymflowError


def _is_json(data: pa.PolarsData) -> pl.LazyFrame:
    def ok(text: str | None) -> bool:
        try:
            json.loads(text)  # type: ignore[arg-type]
            return True
        except (TypeError, ValueError):
            return False

    return data.lazyframe.select(pl.col(data.key).map_elements(ok, return_dtype=pl.Boolean))


def _not_nan(data: pa.PolarsData) -> pl.LazyFrame:
    return data.lazyframe.select(pl.col(data.key).is_nan().not_())


JSON = pa.Check(_is_json, error="not valid JSON")
SPLITS = ["train", "val", "heldout"]
FAILURE_KINDS = sorted(str(kind) for kind in FailureKind)
"""Every kind a row may carry: scored model mistakes, and infrastructure or policy faults that
left a rollout without a verdict (its reward is then null)."""

TASKS = pa.DataFrameSchema(
    {
        "task_id": pa.Column(pl.String, pa.Check.str_length(min_value=1), unique=True),
        "env": pa.Column(pl.String, pa.Check.str_length(min_value=1)),
        "split": pa.Column(pl.String, pa.Check.isin(SPLITS)),
        "prompt": pa.Column(pl.String, JSON),
        "tools": pa.Column(pl.String, JSON),
        "ground_truth": pa.Column(pl.String, JSON),
        "generator": pa.Column(pl.String),
        "seed": pa.Column(pl.Int64),
        "content_hash": pa.Column(pl.String, pa.Check.str_matches(r"^[0-9a-f]{64}$"), unique=True),
    },
    strict=True,
    name="tasks",
)

ROLLOUTS = pa.DataFrameSchema(
    {
        "rollout_id": pa.Column(pl.String, pa.Check.str_length(min_value=1), unique=True),
        "run_id": pa.Column(pl.String),
        "iteration": pa.Column(pl.Int64, pa.Check.ge(0)),
        "policy_version": pa.Column(pl.Int64, pa.Check.ge(0)),
        "env": pa.Column(pl.String),
        "env_version": pa.Column(pl.String),
        "task_id": pa.Column(pl.String, pa.Check.str_length(min_value=1)),
        "group_id": pa.Column(pl.String),
        "sample_idx": pa.Column(pl.Int64, pa.Check.ge(0)),
        "dataset_hash": pa.Column(pl.String),
        "trajectory": pa.Column(pl.String, JSON),
        "prompt_ids": pa.Column(pl.List(pl.Int64)),
        "completion_ids": pa.Column(pl.List(pl.Int64)),
        "logprobs": pa.Column(pl.List(pl.Float64)),
        "env_mask": pa.Column(pl.List(pl.Int64)),
        "reward": pa.Column(
            pl.Float64,
            [pa.Check(_not_nan, error="reward is NaN"), pa.Check.in_range(-1.0, 1.0)],
            nullable=True,  # unknown: the episode never reached the verifier (failure_kind says why)
        ),
        "reward_components": pa.Column(pl.String, JSON),
        "success": pa.Column(pl.Boolean),
        "failure_kind": pa.Column(pl.String, pa.Check.isin(FAILURE_KINDS), nullable=True),
        "used_for_training": pa.Column(pl.Boolean),
        "turns": pa.Column(pl.Int64, pa.Check.ge(0)),
        "tool_calls": pa.Column(pl.Int64, pa.Check.ge(0)),
        "tokens": pa.Column(pl.Int64, pa.Check.ge(0)),
        "latency_s": pa.Column(pl.Float64, pa.Check.ge(0.0)),
        "seed": pa.Column(pl.Int64),
        "started_at": pa.Column(pl.Float64),
        # optional lineage the rollout engine adds (GRPO's in-loop rows predate them)
        "policy": pa.Column(pl.String, required=False, nullable=True),
        "failure_detail": pa.Column(pl.String, required=False, nullable=True),
        # 0 for a rollout's first row; ``--retry-failed`` adds 1, 2 ... (the latest one counts)
        "attempt": pa.Column(pl.Int64, pa.Check.ge(0), required=False),
    },
    strict=True,
    unique=["group_id", "sample_idx"],
    checks=[
        pa.Check(
            lambda d: d.lazyframe.select(
                pl.col("reward").is_not_null() | pl.col("failure_kind").is_not_null()
            ),
            error="reward is null without a failure_kind saying why",
        ),
        pa.Check(
            lambda d: d.lazyframe.select(pl.col("reward").is_null() | (pl.col("turns") >= 1)),
            error="a scored rollout has no turn",
        ),
        pa.Check(
            lambda d: d.lazyframe.select(
                (pl.col("completion_ids").list.len() == pl.col("logprobs").list.len())
                & (pl.col("completion_ids").list.len() == pl.col("env_mask").list.len())
            ),
            error="completion_ids, logprobs and env_mask differ in length",
        ),
    ],
    name="rollouts",
)


def collected_rollouts(group_size: int, reward_range: tuple[float, float]) -> pa.DataFrameSchema:
    """``ROLLOUTS`` plus what one collection knows: its group size and its env's reward range;
    every row it writes says its ``attempt``."""
    low, high = reward_range
    return ROLLOUTS.update_columns(
        {
            "sample_idx": {"checks": [pa.Check.ge(0), pa.Check.lt(group_size)]},
            "reward": {
                "checks": [
                    pa.Check(_not_nan, error="reward is NaN"),
                    pa.Check.in_range(low, high),
                ]
            },
            "attempt": {"required": True},
        }
    )


ROLLOUT_ATTEMPTS = pa.DataFrameSchema(
    {
        "rollout_id": pa.Column(pl.String),
        "attempt": pa.Column(pl.Int64, pa.Check.ge(0)),
    },
    unique=["rollout_id", "attempt"],
    name="(rollout_id, attempt)",  # what an error names: the pair that repeats
)
"""Every row of a collection's part files, retried rollouts included: a rollout may have rows
from several attempts (readers keep the latest, then ``ROLLOUTS`` holds: one row per id), but
two rows of the same attempt are a duplicate."""


EVAL_ROWS = pa.DataFrameSchema(
    {
        "task_id": pa.Column(pl.String),
        "policy": pa.Column(pl.String),
        "sample_idx": pa.Column(pl.Int64, pa.Check.ge(0)),
        "reward": pa.Column(pl.Float64, pa.Check.in_range(-1.0, 1.0)),
        "success": pa.Column(pl.Boolean),
        "well_formed": pa.Column(pl.Boolean),
        "unsafe": pa.Column(pl.Boolean),
        "failure_kind": pa.Column(pl.String, nullable=True),
        "completion_tokens": pa.Column(pl.Int64, pa.Check.ge(0)),
        "latency_s": pa.Column(pl.Float64, pa.Check.ge(0.0)),
    },
    strict=True,
    unique=["policy", "task_id", "sample_idx"],
    name="eval_rows",
)


def validate(df: pl.DataFrame, schema: pa.DataFrameSchema, source: str = "frame") -> pl.DataFrame:
    """Validate data, not just types; raise a ``GymflowError`` naming columns and rows."""
    try:
        return schema.validate(df, lazy=True)
    except (pa.errors.SchemaErrors, pa.errors.SchemaError) as exc:
        raise GymflowError(FailureKind.SCHEMA_VIOLATION, f"{source}: {describe(exc)}") from None


def describe(exc: Exception) -> str:
    """One line per failed check: column, check and the first offending rows."""
    cases = getattr(exc, "failure_cases", None)
    if cases is None or not hasattr(cases, "iter_rows"):
        return str(exc).splitlines()[0]
    lines = []
    grouped: dict[tuple, list] = {}
    for row in cases.iter_rows(named=True):
        check = row.get("check")
        column = row.get("column") or row.get("schema_context")
        if check in ("column_in_dataframe", "column_in_schema"):
            # a missing or unexpected column: pandera puts the column's name in failure_case
            what = "missing" if check == "column_in_dataframe" else "not in the schema"
            lines.append(f"column {row.get('failure_case')!r} is {what}")
            continue
        grouped.setdefault((column, check), []).append((row.get("index"), row.get("failure_case")))
    for (column, check), found in grouped.items():
        rows = [r for r, _ in found if r is not None]
        if not rows:  # a column-wide check such as the dtype: show what was found instead
            lines.append(f"column {column!r} failed {check} (found {found[0][1]})")
            continue
        shown = ", ".join(str(r) for r in rows[:8])
        more = f" (+{len(rows) - 8} more)" if len(rows) > 8 else ""
        lines.append(f"column {column!r} failed {check} at rows [{shown}]{more}")
    return "; ".join(lines)


def write_table(df: pl.DataFrame, schema: pa.DataFrameSchema, path: Path) -> Path:
    """Validate then write atomically (temp file + rename): a crash never leaves half a file."""
    validate(df, schema, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # unique: concurrent writers
    try:
        df.write_parquet(tmp)
        tmp.replace(path)
    except Exception as exc:
        if _disk_full(exc):
            raise GymflowError(
                FailureKind.DISK_FULL,
                f"no space left on {path.parent}: free space there and run the same command "
                "again (files already written are intact; this one was not written)",
            ) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)  # only still there when the write or the rename failed
    return path


def _disk_full(exc: BaseException) -> bool:
    """ENOSPC, raised as an ``OSError`` or wrapped in a polars error's message."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return "os error 28" in str(exc) or "No space left on device" in str(exc)


def read_table(path: Path, schema: pa.DataFrameSchema | None = None) -> pl.DataFrame:
    """Read and validate (``schema`` None: read only); corrupt files and schema violations
    raise with a clear reason."""
    try:
        df = pl.read_parquet(path)
    except FileNotFoundError:
        raise
    except (Exception, pl.exceptions.PanicException) as exc:  # a panic is a BaseException
        raise GymflowError(
            FailureKind.CORRUPT_FILE, f"{path}: not a readable Parquet file ({exc})"
        ) from None
    return df if schema is None else validate(df, schema, str(path))
