"""The ``gymflow`` group: commands are imported when they run, so ``gymflow --help`` is fast.

Each command lives in a module of :mod:`gymflow.cli.commands`, and the table
:data:`gymflow.cli.commands.COMMANDS` names it with its one-line help. ``gymflow --help`` lists
the table without importing a command module (they pull in pydantic, torch, Prefect …); running
a command, or asking for its ``--help``, imports that module only. Anything that walks the tree
(the docs' CLI reference, shell completion) gets the real commands from :meth:`get_command`.
``tests/test_cli_front_door.py`` holds the table's help to each command's own docstring.

Errors of the command line itself (an unknown option, a missing argument) are printed as every
other error is: one ``error: [bad_request] …`` line with what to do (:mod:`gymflow.cli.errors`).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup

from gymflow.cli.commands import COMMANDS


def load_command(name: str) -> _click.Command:
    """The real command ``name`` of the table: its module imported, its Typer app built."""
    target = COMMANDS[name].target
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(f"gymflow.cli.commands.{module_name}")
    command = typer.main.get_command(getattr(module, attr))
    command.name = name
    return command


class QuickHelpGroup(TyperGroup):
    """A Typer group that parses its own options without importing pydantic."""

    def get_help_option(self, ctx: _click.Context):
        """``--help`` with a bool default: Typer skips coercing a bool flag's bool value, and
        coercing any value imports pydantic (~0.3 s) before the subcommand is even found."""
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


class LazyGroup(QuickHelpGroup):
    """A Typer group whose commands come from :data:`COMMANDS`, imported on first use."""

    _summaries_only = False  # set while the group's own help is formatted

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if self._summaries_only:  # a stand-in with the table's help: no import for a listing
            return TyperCommand(cmd_name, help=entry.help, hidden=entry.hidden)
        self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        self._summaries_only = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._summaries_only = False

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        with formatter.section("Options"):  # --version is read in main(), before any parsing
            formatter.write_dl(
                [("--version", "Print gymflow's version and exit."), ("--help", HELP_TEXT)]
            )
        self.format_commands(ctx, formatter)

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        try:
            return self._click_resolve_command(ctx, args)
        except _click.exceptions.UsageError as exc:
            known = [n for n in self.list_commands(ctx) if not COMMANDS.get(n, _VISIBLE).hidden]
            close = difflib.get_close_matches(args[0], known, n=1) if args else []
            if close:
                exc.message = f"{exc.message.rstrip('.')}; did you mean {close[0]!r}?"
            raise

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; a usage error is one ``error: [bad_request] …`` line, exit 2,
        and so is any :class:`~gymflow.core.failures.GymflowError` no command caught (a
        tracking server that does not answer, found by a preflight deep in a command)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        from gymflow.cli.errors import error_line, show_click_error

        if (sys.argv[1:] if args is None else list(args)) == ["--version"]:
            typer.echo(version_line())
            sys.exit(0)

        if os.environ.get("_GYMFLOW_COMPLETE"):  # a Tab: Typer's completion classes answer
            from typer._completion_classes import completion_init

            completion_init()
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _click.exceptions.ClickException as exc:
            sys.exit(show_click_error(exc))
        except typer.Abort:
            typer.echo("error: [bad_request] aborted", err=True)
            sys.exit(1)
        except Exception as exc:
            from gymflow.core.failures import GymflowError

            if not isinstance(exc, GymflowError):
                raise
            typer.echo(error_line(exc.kind, exc.detail), err=True)
            sys.exit(2 if exc.kind in ("bad_request", "bad_config") else 1)
        sys.exit(code if isinstance(code, int) else 0)


def version_line() -> str:
    """``gymflow 0.1.0 (Python 3.11.7)``. The root group takes no Typer options: processing
    one makes Typer import pydantic (~0.3 s) before any subcommand, even for its ``--help``."""
    from importlib.metadata import version

    return f"gymflow {version('gymflow')} (Python {sys.version.split()[0]})"


class _Visible:
    hidden = False


_VISIBLE = _Visible()
HELP_TEXT = "Show this message and exit."
