"""Pieces several commands share: the ``--set``, ``--quiet`` and ``--run`` options, the
progress mode, and the watchdog of long-running commands. Light to import (typer only)."""

from __future__ import annotations

import os

import typer

SET_HELP = (
    "Override one config field, dotted: --set grpo.learning_rate=1e-4 --set "
    'gate.general_sets=["bfcl:simple_python"]. VALUE is JSON (numbers, true, null, lists, '
    "objects); anything else is a string; [a,b] is a list of strings. Repeatable; applied "
    "after --config, validated like it (see `gymflow config show`)."
)


def command_app(**settings) -> typer.Typer:
    """A command module's Typer: plain help (fast, no rich), no per-command completion flags
    (``gymflow completion`` covers the whole tree)."""
    return typer.Typer(rich_markup_mode=None, add_completion=False, **settings)


def command_group(help_text: str) -> typer.Typer:
    """A group of subcommands (``gymflow runs list``): a group even with one subcommand, which
    Typer would otherwise turn into the command itself."""
    from gymflow.cli.lazy_group import QuickHelpGroup

    group = command_app(cls=QuickHelpGroup, no_args_is_help=True, help=help_text)
    group.callback()(_no_options)
    return group


def _no_options() -> None:
    pass


def set_option() -> typer.models.OptionInfo:
    return typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP)


def quiet_option() -> typer.models.OptionInfo:
    return typer.Option(
        False, "--quiet", "-q", help="Print only the final table: no progress lines or bars."
    )


def run_option(help_text: str) -> typer.models.OptionInfo:
    return typer.Option(None, "--run", metavar="RUN_ID", help=help_text)


def hidden_run_id_option() -> typer.models.OptionInfo:
    """``--run-id``, the old spelling of ``--run``: still read, not shown."""
    return typer.Option(None, "--run-id", hidden=True)


def show_progress(quiet: bool) -> str:
    """Progress for this command and what it starts (:func:`gymflow.core.progress.configure`):
    a bar on a terminal, lines in a log, nothing with ``--quiet``. Prefect's and MLflow's own
    console lines step aside for it (warnings and errors still show on stderr, errors only
    with ``--quiet``); the Prefect UI keeps every log line."""
    from gymflow.core import progress

    mode = progress.configure(quiet)
    level = "ERROR" if quiet else "WARNING"
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", level)
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", level)
    return mode


def children_die_with_me() -> None:
    """Start the parent watchdog for a long-running command: a SIGKILL of this process then
    takes its servers, workers and pools with it (:mod:`gymflow.core.watchdog`)."""
    from gymflow.core.watchdog import start_watchdog

    start_watchdog()


def one_of(new: str | None, old: str | None, flag: str) -> str | None:
    """The value of an option given under its name or its old hidden spelling (not both)."""
    if new is not None and old is not None and new != old:
        from gymflow.cli.errors import fail

        fail("bad_request", f"{flag} given twice (also under its old spelling); give it once")
    return new if new is not None else old
