"""The command-line reference: every ``gymflow`` command with its arguments, options and an
example, read from the Typer app's command tree (``gymflow.cli.main:app``)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache

from refgen import cell, code, prose, table

EXAMPLES: dict[str, str] = {
    "run": "gymflow run --seed 1 --config my.json",
    "rerun": "gymflow rerun 20261127-030312-ab12",
    "verify": "gymflow verify --env tool_call --tasks environments/tool_call/examples/tasks.jsonl "
    "--responses responses.jsonl --out scores.jsonl",
    "deploy": 'gymflow deploy --cron "0 3 * * *" --config my.json',
    "eval": "gymflow eval --env tool_call,math --policy models:/gymflow-tool_call@champion "
    "--split heldout",
    "promote": "gymflow promote 7",
    "rollback": "gymflow rollback",
    "ui": "gymflow ui --prefect-port 4300 --mlflow-port 5050",
    "env list": "gymflow env list",
    "env check": "gymflow env check tool_call --n 50",
    "env serve": "gymflow env serve workplace --port 8765 --workers 4",
    "policy serve": "gymflow policy serve --policy models:/gymflow-tool_call@champion --port 8000",
    "rollouts collect": "gymflow rollouts collect --env counter "
    "--tasks environments/counter/examples/tasks.jsonl --policy scripted:counter "
    "--out runs/collect-1 --num-repeats 8",
    "rollouts export": "gymflow rollouts export --in runs/collect-1 --format dpo "
    "--out runs/collect-1/dpo.jsonl",
    "models list": "gymflow models list",
    "models fetch": "gymflow models fetch smollm2-135m-instruct",
    "runs list": "gymflow runs list",
    "tasks generate": "gymflow tasks generate --env math --n 400 --out math-tasks",
    "tasks import-traces": "gymflow tasks import-traces traces.jsonl --env counter "
    "--out traces-tasks.jsonl",
    "tasks fetch": "gymflow tasks fetch bfcl",
}
"""One example per command, keyed by its path. A command without one gets its usage line
(and the build says so); an example naming an option the command lacks is a build warning."""


@dataclass(frozen=True)
class Param:
    """An argument or option as ``--help`` shows it."""

    names: list[str]
    usage: str
    help: str
    is_argument: bool


@dataclass(frozen=True)
class Command:
    """A leaf command, named by its path under ``gymflow``."""

    path: str
    help: str
    usage: str
    params: list[Param]


def _root():
    import typer

    from gymflow.cli.main import app

    return typer.main.get_command(app)


def _params(command, ctx) -> list[Param]:
    out = []
    for p in command.params:
        if getattr(p, "hidden", False):
            continue
        record = p.get_help_record(ctx)
        usage, help_text = record if record is not None else (p.name, "")
        is_argument = p.param_type_name == "argument"
        names = [*p.opts, *getattr(p, "secondary_opts", [])] if not is_argument else [p.name]
        out.append(Param(names, usage, help_text, is_argument))
    return out


@cache
def commands() -> tuple[Command, ...]:
    """Every leaf command of the CLI, depth first in the order ``--help`` lists them; the root's
    own options (``--version``…) as the command with the empty path."""
    root = _root()
    found: list[Command] = []

    def walk(command, path: list[str], parent) -> None:
        name = path[-1] if path else "gymflow"  # usage lines join the parents' names
        ctx = command.make_context(name, [], parent=parent, resilient_parsing=True)
        if hasattr(command, "list_commands"):
            if path == [] and command.params:
                found.append(Command("", command.help or "", "", _params(command, ctx)))
            for sub in command.list_commands(ctx):
                walk(command.get_command(ctx, sub), [*path, sub], ctx)
            return
        usage = command.get_usage(ctx).removeprefix("Usage: ").strip()
        found.append(Command(" ".join(path), command.help or "", usage, _params(command, ctx)))

    walk(root, [], None)
    return tuple(found)


@cache
def root_help() -> tuple[str, list[tuple[str, str]]]:
    """The ``gymflow`` group's own help text and the options its ``--help`` lists (``--version``
    is read before any parsing, so it is in the help, not among the group's parameters)."""
    root = _root()
    ctx = root.make_context("gymflow", [], resilient_parsing=True)
    text = root.get_help(ctx)
    options = []
    if "\nOptions:\n" in text:
        block = text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
        for line in block.splitlines():
            name, _, what = line.strip().partition("  ")
            if name.startswith("-"):
                options.append((name, what.strip()))
    return " ".join((root.help or "").split()), options


def has_option(path: list[str], option: str | None) -> bool:
    """Whether the command at ``path`` exists (and has ``option``, when one is named)."""
    for c in commands():
        if c.path == " ".join(path):
            return option is None or any(option in p.names for p in c.params)
    return False


_DOC_EXAMPLE = re.compile(r"^\s*Example:\s*(.+?)\s*$", re.MULTILINE)


def example(c: Command) -> str | None:
    """The command's example: its own help's ``Example:`` line, else ``EXAMPLES``."""
    found = _DOC_EXAMPLE.search(c.help)
    return found.group(1) if found else EXAMPLES.get(c.path)


def _example_options(text: str) -> list[str]:
    first = re.split(r"&&|\|\||;|\|", text)[0]  # the command itself, not what follows it
    return [t.split("=")[0] for t in shlex.split(first) if t.startswith("--")]


def problems() -> list[str]:
    """Examples naming an option their command does not have: the build fails on them."""
    out = []
    for c in commands():
        text = example(c) if c.path else None
        if text is None:
            continue
        names = {n for p in c.params for n in p.names} | {"--help"}
        out += [
            f"the example of 'gymflow {c.path}' uses {opt}, which it does not have"
            for opt in _example_options(text)
            if opt not in names
        ]
    return out


def unused() -> list[str]:
    """Examples for commands the CLI does not have (yet, or any more): only reported."""
    paths = {c.path for c in commands()}
    return [f"CLI example for 'gymflow {p}', a command the CLI lacks" for p in EXAMPLES
            if p not in paths]  # fmt: skip


def missing_examples() -> list[str]:
    """Commands shown with their usage line for want of an example."""
    return [c.path for c in commands() if c.path and example(c) is None]


def _section(c: Command) -> str:
    title = f"gymflow {c.path}" if c.path else "gymflow (global options)"
    text = prose(_DOC_EXAMPLE.sub("", c.help).strip())
    lines = [f"## `{title}`", "", text, ""]
    if c.usage:
        lines += ["```text", c.usage, "```", ""]
    if c.params:
        rows = [[code(p.usage), cell(p.help)] for p in c.params]
        lines.append(table(["argument / option", "what it does"], rows))
    if c.path:
        lines += ["Example:", "", "```bash", example(c) or c.usage, "```", ""]
    return "\n".join(lines)


def _summary(text: str) -> str:
    """A command's first paragraph, whole (a docstring wraps its first sentence over lines)."""
    return " ".join(text.strip().split("\n\n")[0].split())


def page() -> str:
    """The markdown of ``reference/cli.md``."""
    cmds = commands()
    index = [[f"[`gymflow {c.path}`](#{_anchor(c.path)})", cell(_summary(c.help))]
             for c in cmds if c.path]  # fmt: skip
    return "\n".join(
        [
            "# Command-line reference",
            "",
            "_Generated from the `gymflow` command's own tree (`cli/`) when the docs are "
            "built: every command, argument and option is the one `--help` shows._",
            "",
            "A command refused for bad input prints one line naming the error kind "
            "(`error: [bad_config] …`) before any work; the [error kinds](errors.md) page "
            "says what to do about each kind.",
            "",
            prose(root_help()[0]),
            "",
            table(["command", "what it does"], index),
            "## Global options",
            "",
            table(["option", "what it does"], [[code(o), cell(w)] for o, w in root_help()[1]]),
            *(_section(c) for c in cmds),
        ]
    )


def _anchor(path: str) -> str:
    """The id mkdocs gives the heading ``gymflow PATH`` (its toc slugify)."""
    return "gymflow-" + path.replace(" ", "-")
