"""The ``gymflow`` command line.

Commands live in :mod:`gymflow.cli.commands`, one module per concern, listed by the table there
and imported only when they run (:class:`gymflow.cli.lazy_group.LazyGroup`): ``gymflow --help``
imports typer and nothing of the library (``benchmarks/cli_start.py`` measures it). Every
error is one ``error: [kind] …`` line (:mod:`gymflow.cli.errors`).
"""

from __future__ import annotations

import sys

import typer

from gymflow.cli.lazy_group import LazyGroup

app = typer.Typer(
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="The RLVR lifecycle for LLM agents: data, environments, rollouts, SFT and GRPO, "
    "evaluation and a gated model registry, as Prefect flows tracked in MLflow. "
    "Start with `gymflow run --smoke`; `gymflow COMMAND --help` says more.",
)


@app.callback()
def root() -> None:
    """The RLVR lifecycle for LLM agents (no options of its own but --version and --help: see
    :func:`gymflow.cli.lazy_group.version_line`)."""


def main() -> None:  # pragma: no cover
    sys.exit(app())


if __name__ == "__main__":  # `python -m gymflow.cli.main`: what background processes run
    main()
