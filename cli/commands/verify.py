"""``gymflow verify``: score given responses with an environment's verifier, no model."""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import command_app

verify_app = command_app()


@verify_app.command("verify")
def verify(
    env: str = typer.Option(..., help="Environment whose verifier scores the responses."),
    tasks: Path = typer.Option(..., help="Tasks, JSONL (see --format)."),
    responses: Path = typer.Option(
        ..., help='JSONL rows: "task_id" and either "response" (text) or "output" (items).'
    ),
    out: Path = typer.Option(..., help="Scores, JSONL: one row per response, same order."),
    fmt: str = typer.Option(
        "gymflow", "--format", help="Task format: gymflow, or one the environment adds."
    ),
) -> None:
    """Score given responses with a verifier, no model.

    Checks a verifier (or scores another system's outputs) with an environment's own scoring.

    Example: gymflow verify --env counter --tasks tasks.jsonl --responses r.jsonl --out s.jsonl
    """
    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.core.jsonl import InputFileError
    from gymflow.env.registry import get_env
    from gymflow.eval.verify_files import summary, unknown_tasks, unscored, verify_files

    try:
        environment = get_env(env)
        scored = verify_files(environment, tasks, responses, out, fmt)
    except (GymflowError, InputFileError) as exc:
        fail_with(exc)
    typer.echo(f"{summary(scored)} -> {out}")
    if unknown := unknown_tasks(scored):
        shown = ", ".join(unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        fail(
            "unknown_task",
            f"{len(unknown)} line(s) name a task_id the tasks file does not hold ({shown}); "
            "they have no reward and are not in the mean: check --tasks and --format",
        )
    if unscored(scored):  # verifier_error (a bug in the environment) or a verifier fault
        fail("verifier_error", f"{unscored(scored)} line(s) have no reward: see 'detail'", 1)
