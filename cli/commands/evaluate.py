"""``gymflow eval``: any policy on several environments, with pass@k, failure buckets, a report.

The flags are :class:`gymflow.eval.suite.EvalOptions`' fields (defaults and help from there).
The table is printed as soon as the episodes are measured; the report files and the MLflow
run come after it. Bad input is one line with its kind, exit 2.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from gymflow.cli.common import command_app, quiet_option, show_progress
from gymflow.core.failures import FailureKind
from gymflow.eval.suite import EvalOptions

BAD_INPUT = (FailureKind.BAD_REQUEST, FailureKind.BAD_CONFIG, FailureKind.UNUSABLE_CHECKPOINT)
"""Kinds said before any work (exit 2); any other failure is the work's (exit 1)."""

eval_app = command_app()


def _flag(field: str) -> str:
    return {"fmt": "--format", "envs": "--env"}.get(field, "--" + field.replace("_", "-"))


def _option(field: str, *flags: str) -> typer.models.OptionInfo:
    """The flag of one ``EvalOptions`` field: its default and help come from the model."""
    info = EvalOptions.model_fields[field]
    default = ... if info.is_required() else info.default
    return typer.Option(default, *(flags or (_flag(field),)), help=info.description)


@eval_app.command("eval")
def evaluate(
    envs: str = _option("envs"),
    policy: str = _option("policy"),
    against: str = _option("against"),
    split: str = _option("split"),
    fmt: str = _option("fmt"),
    run: str = _option("run"),
    samples: int = _option("samples"),
    temperature: float = _option("temperature"),
    limit: int = _option("limit"),
    max_new_tokens: int = _option("max_new_tokens"),
    max_completion_tokens: int = _option("max_completion_tokens"),
    seed: int = _option("seed"),
    out: Path = _option("out"),
    price_prompt: float = _option("price_prompt"),
    price_completion: float = _option("price_completion"),
    mlflow: bool = _option("mlflow", "--mlflow/--no-mlflow"),
    agent: str = _option("agent"),
    max_unscored: float = _option("max_unscored"),
    quiet: bool = quiet_option(),
) -> None:
    """Evaluate a policy, alone or paired against another.

    On environments' tasks (--env), with pass@k, failure buckets and a report; --against runs a
    second policy on the same tasks and seeds. The table is printed as soon as it is measured.

    Example: gymflow eval --env tool_call,math --policy models:/gymflow-tool_call@champion
    """
    started = time.perf_counter()
    show_progress(quiet)
    from pydantic import ValidationError

    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.home import project_home, quiet_libraries

    quiet_libraries()
    values = dict(locals())
    fields = {k: values[k] for k in EvalOptions.model_fields}
    from gymflow.cli.errors import fail_with
    from gymflow.core import progress

    try:
        options = EvalOptions(**fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_flag(str(e['loc'][0]))}: {e['msg']} (got {e['input']!r})" for e in exc.errors()
        )
        typer.echo(f"error: [{FailureKind.BAD_REQUEST}] {problems}", err=True)
        raise typer.Exit(2) from None
    home = project_home()
    from gymflow.eval.splits import GeneratedSplit
    from gymflow.eval.suite import run_eval

    try:
        with progress.track("eval", unit="episode", counts_episodes=True):
            result = run_eval(options, home, GeneratedSplit.like(LifecycleConfig()))
    except GymflowError as exc:
        if exc.kind in BAD_INPUT:
            fail_with(exc)  # bad input: said before any work, exit 2
        if options.mlflow:  # the attempt, on record as failed
            from gymflow.eval.mlflow_run import log_failed_evaluation
            from gymflow.lifecycle.tracking import configure

            configure(home)
            log_failed_evaluation(options, exc)
        fail_with(exc, 1)
    from gymflow.eval.report import console_table, write_report

    typer.echo(console_table(result), nl=False)

    def said(line: str) -> None:  # --quiet: the table only
        if not quiet:
            typer.echo(line)

    said(f"table after {time.perf_counter() - started:.1f} s; episodes in {result.out}")
    files = write_report(result)
    said(f"report: {files.markdown}")
    if options.mlflow:
        from gymflow.eval.mlflow_run import log_evaluation
        from gymflow.lifecycle.tracking import configure

        configure(home)
        said(f"MLflow run {log_evaluation(result, files)} (evaluation)")
