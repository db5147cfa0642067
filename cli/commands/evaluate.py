"""``gymflow eval``: any policy on several environments, with pass@k, failure buckets, a report.

The flags are :class:`gymflow.eval.suite.EvalOptions`' fields (defaults and help from there).
The table is printed as soon as the episodes are measured; the report files and the MLflow
run come after it. Bad input is one line with its kind, exit 2.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from gymflow.eval.suite import EvalOptions


def _flag(field: str) -> str:
    return {"fmt": "--format", "envs": "--env"}.get(field, "--" + field.replace("_", "-"))


def _option(field: str, *flags: str) -> typer.models.OptionInfo:
    """The flag of one ``EvalOptions`` field: its default and help come from the model."""
    info = EvalOptions.model_fields[field]
    default = ... if info.is_required() else info.default
    return typer.Option(default, *(flags or (_flag(field),)), help=info.description)


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
) -> None:
    """Evaluate a policy (and --against another, paired) on environments' tasks; print the table."""
    started = time.perf_counter()
    from pydantic import ValidationError

    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.home import project_home, quiet_libraries

    quiet_libraries()
    values = dict(locals())
    fields = {k: values[k] for k in EvalOptions.model_fields}
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
        result = run_eval(options, home, GeneratedSplit.like(LifecycleConfig()))
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    from gymflow.eval.report import console_table, write_report

    typer.echo(console_table(result), nl=False)
    typer.echo(f"table after {time.perf_counter() - started:.1f} s; episodes in {result.out}")
    files = write_report(result)
    typer.echo(f"report: {files.markdown}")
    if options.mlflow:
        from gymflow.eval.mlflow_run import log_evaluation
        from gymflow.lifecycle.tracking import configure

        configure(home)
        typer.echo(f"MLflow run {log_evaluation(result, files)} (evaluation)")


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
