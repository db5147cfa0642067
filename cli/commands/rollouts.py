"""``gymflow rollouts collect`` and ``gymflow rollouts export``: rollouts without training.

The collect flags are :class:`~gymflow.rollout.collection.CollectOptions`' fields (defaults and
help from there); the run id is ``--run``, as everywhere (``--run-id`` is still read).
"""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import (
    children_die_with_me,
    command_group,
    hidden_run_id_option,
    one_of,
)
from gymflow.rollout.collection import CollectOptions  # light: the flags are its fields

rollouts_app = command_group("Rollouts: collect, export.")


def _collect_flag(field: str) -> str:
    return {"fmt": "--format", "run_id": "--run"}.get(field, "--" + field.replace("_", "-"))


def _collect_option(field: str, *flags: str) -> typer.models.OptionInfo:
    """The flag of one ``CollectOptions`` field: its default and help come from the model."""
    info = CollectOptions.model_fields[field]
    default = ... if info.is_required() else info.default
    return typer.Option(default, *flags, help=info.description)


@rollouts_app.command("collect")
def rollouts_collect(
    env: str = _collect_option("env"),
    tasks: Path = _collect_option("tasks"),
    fmt: str = _collect_option("fmt", _collect_flag("fmt")),
    policy: str = _collect_option("policy"),
    out: Path = _collect_option("out"),
    num_repeats: int = _collect_option("num_repeats"),
    concurrency: int = _collect_option("concurrency"),
    run: str = _collect_option("run_id", _collect_flag("run_id")),
    run_id: str = hidden_run_id_option(),
    env_url: str = _collect_option("env_url"),
    iteration: int = _collect_option("iteration"),
    policy_version: int = _collect_option("policy_version"),
    seed: int = _collect_option("seed"),
    temperature: float = _collect_option("temperature"),
    max_new_tokens: int = _collect_option("max_new_tokens"),
    max_completion_tokens: int = _collect_option("max_completion_tokens"),
    progress: bool = _collect_option("progress"),
    retry_failed: bool = _collect_option("retry_failed", "--retry-failed"),
    engine: str = _collect_option("engine"),
    ray_address: str = _collect_option("ray_address"),
    ray_workers: int = _collect_option("ray_workers"),
) -> None:
    """Collect G rollouts per task into Parquet; re-running resumes without loss or duplicates.

    With --retry-failed, rollouts whose latest row has no reward (env_unavailable, timeout ...;
    not scored mistakes) are run again: a new row per rollout (attempt + 1), old rows kept for
    audit; readers and exports see the latest attempt.

    Example: gymflow rollouts collect --env counter --tasks t.jsonl --policy scripted:counter --out c
    """
    from pydantic import ValidationError

    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.rollout.collection import run_collect

    try:
        options = CollectOptions(
            env=env,
            tasks=tasks,
            fmt=fmt,
            policy=policy,
            out=out,
            num_repeats=num_repeats,
            concurrency=concurrency,
            run_id=one_of(run, run_id, "--run"),
            env_url=env_url,
            iteration=iteration,
            policy_version=policy_version,
            seed=seed,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            max_completion_tokens=max_completion_tokens,
            progress=progress,
            retry_failed=retry_failed,
            engine=engine,
            ray_address=ray_address,
            ray_workers=ray_workers,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{_collect_flag(str(e['loc'][0]))}: {e['msg']} (got {e['input']!r})"
            for e in exc.errors()
        )
        fail("bad_request", problems)
    children_die_with_me()
    try:
        report = run_collect(options)
    except GymflowError as exc:
        fail_with(exc)
    retried = (
        f"{report.retried} retried ({report.still_failed} still without a reward), "
        if retry_failed
        else ""
    )
    typer.echo(
        f"run {report.run_id}: {report.collected} collected, {report.already_on_disk} already on "
        f"disk, {retried}{report.unscored} without a reward, failures {report.failures}; "
        f"{report.rollouts_per_s} rollouts/s, {report.tokens_per_s} tokens/s -> {out}"
    )
    if report.engine["name"] == "ray":
        e = report.engine
        typer.echo(
            f"ray: {e['workers']} workers (started in {e['workers_start_s']} s, cluster in "
            f"{e['cluster_start_s']} s), {e['shards']} shards, {e['worker_restarts']} worker "
            f"restarts, {e['rollouts_run_again']} rollouts run again"
        )


@rollouts_app.command("export")
def rollouts_export(
    src: Path = typer.Option(
        ...,
        "--in",
        help="A rollout folder: a lifecycle run (runs/<id>), a collection, an evaluation "
        "(runs/<id>/eval/<name>), or the rollouts/ folder of one.",
    ),
    fmt: str = typer.Option(..., "--format", help="hf, nemo_gym, sft or dpo."),
    out: Path = typer.Option(..., help="Where to write (a folder for hf, else a JSONL file)."),
    min_reward: float = typer.Option(1.0, help="sft: best of a group must reach this reward."),
    tokenizer: Path = typer.Option(None, help="sft/dpo: render prompts with this chat template."),
) -> None:
    """Export rollouts (training, evaluation or collection): HF datasets, NeMo Gym rollouts, SFT
    demos or DPO pairs.

    Example: gymflow rollouts export --in runs/RUN_ID --format sft --out demos.jsonl
    """
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.rollout.export import export

    try:
        n = export(src, fmt, out, min_reward=min_reward, tokenizer=tokenizer)
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(f"{n} rows ({fmt}) -> {out}")
