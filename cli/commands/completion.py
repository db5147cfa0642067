"""``gymflow completion SHELL``: the script that makes Tab complete gymflow's commands and flags.

The script calls ``gymflow`` back with ``_GYMFLOW_COMPLETE`` set for each Tab (Typer's
completion), which lists the commands without importing them (:mod:`gymflow.cli.lazy_group`),
so a Tab answers as fast as ``gymflow --help``.
"""

from __future__ import annotations

import typer

from gymflow.cli.common import command_app

completion_app = command_app()

SHELLS = ("bash", "zsh", "fish")


@completion_app.command("completion")
def completion(
    shell: str = typer.Argument(..., help="bash, zsh or fish."),
) -> None:
    """Print the shell completion script (bash, zsh, fish).

    Load it in the current shell, or add that line to ~/.bashrc (~/.zshrc; fish: save it as
    ~/.config/fish/completions/gymflow.fish).

    Example: eval "$(gymflow completion bash)"
    """
    if shell not in SHELLS:
        from gymflow.cli.errors import fail

        fail("bad_request", f"no completion for shell {shell!r}; choose one of {', '.join(SHELLS)}")
    from typer._completion_shared import get_completion_script

    typer.echo(
        get_completion_script(prog_name="gymflow", complete_var="_GYMFLOW_COMPLETE", shell=shell)
    )
