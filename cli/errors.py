"""Error lines of the command line: ``error: [kind] what went wrong; what to do`` on stderr.

Every command reports a failure this way, with one of :class:`~gymflow.core.failures.FailureKind`'s
kinds, so a person (or a CI log search) can tell a bad flag (``bad_request``) from a bad config
(``bad_config``) or a dead server (``env_unavailable``) without reading a traceback.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from typer import _click

USAGE_KIND = "bad_request"
"""The kind of a command-line mistake (unknown option, missing argument, bad value)."""


def error_line(kind: str, message: str) -> str:
    return f"error: [{kind}] {message}"


def fail(kind: str, message: str, code: int = 2) -> NoReturn:
    """Print one error line with its kind and exit with ``code`` (2: bad input, 1: the work
    failed)."""
    typer.echo(error_line(str(kind), message), err=True)
    raise typer.Exit(code)


def fail_with(exc: Exception, code: int = 2) -> NoReturn:
    """A :class:`~gymflow.core.failures.GymflowError` as its error line (its kind, its detail)."""
    kind = getattr(exc, "kind", None)
    detail = getattr(exc, "detail", None)
    if kind is None or detail is None:
        fail("internal_error", f"{type(exc).__name__}: {exc}", code)
    fail(kind, detail, code)


def show_click_error(exc: _click.exceptions.ClickException) -> int:
    """Print a usage error as one line (the full help for a bare group); its exit code."""
    if isinstance(exc, _click.exceptions.NoArgsIsHelpError):
        exc.show()
        return 0
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    message = exc.format_message().rstrip(".")
    typer.echo(error_line(USAGE_KIND, f"{message}{hint}"), err=True)
    return exc.exit_code
