"""The docs tell the truth about the code: the generated reference names everything the code
has, and the README's two commands are the ones the Makefile and CI run.

The lists are read from the code here, independently of the generator in ``docs/hooks/refgen/``
(which ``mkdocs build --strict`` in ``make test`` runs): the config models' fields, the CLI's
command tree, ``FailureKind``, the ``log_metric``/``log_metrics`` call sites and every
``GYMFLOW_*`` name in the source. A name the reference misses fails here, naming it.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))

from refgen import (  # noqa: E402
    cli_ref,
    config_ref,
    env_vars_ref,
    errors_ref,
    metrics_ref,
    source_files,
)

README = ROOT / "README.md"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {
        "config": config_ref.page(),
        "cli": cli_ref.page(),
        "errors": errors_ref.page(),
        "metrics": metrics_ref.page(),
        "env": env_vars_ref.page(),
    }


def _fields(model, prefix: str = "") -> list[str]:
    import typing

    from pydantic import BaseModel

    out = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out += _fields(arg, f"{prefix}{name}.")
    return out


def test_every_config_field_is_in_the_reference_with_a_description(pages):
    from gymflow.lifecycle.config import LifecycleConfig

    fields = _fields(LifecycleConfig)
    assert len(fields) > 100  # the nested settings are walked too
    missing = [f for f in fields if f"`{f}`" not in pages["config"]]
    assert not missing, f"config fields missing from the reference: {missing}"
    assert config_ref.problems() == []


def _cli_tree() -> dict[str, list[str]]:
    """Every leaf command's path and option names, walked from the installed entry point."""
    import typer

    from gymflow.cli.main import app

    found: dict[str, list[str]] = {}

    def walk(command, path, parent):
        ctx = command.make_context("gymflow", [], parent=parent, resilient_parsing=True)
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name], ctx)
        else:
            found[" ".join(path)] = [o for p in command.params if not getattr(p, "hidden", False)
                                     for o in p.opts if o.startswith("-")]  # fmt: skip

    walk(typer.main.get_command(app), [], None)
    return found


def test_every_cli_command_and_option_is_in_the_reference(pages):
    tree = _cli_tree()
    assert {"run", "eval", "env check"} <= set(tree)
    for path, options in tree.items():
        heading = f"## `gymflow {path}`"
        assert heading in pages["cli"], f"gymflow {path} is missing from the CLI reference"
        section = pages["cli"].split(heading, 1)[1].split("\n## ", 1)[0]
        assert "Example:" in section, f"gymflow {path} has no example"
        for option in options:
            assert option in section, f"gymflow {path} {option} is missing from its section"
    assert cli_ref.problems() == []


def test_every_error_kind_is_in_the_reference_with_what_to_do(pages):
    from gymflow.core.failures import FailureKind

    missing = [k.value for k in FailureKind if f"| `{k.value}` |" not in pages["errors"]]
    assert not missing, f"error kinds missing from the reference: {missing}"
    no_advice = [k.value for k in FailureKind if not errors_ref.ADVICE.get(k.value)]
    assert not no_advice, f"error kinds without what to do (errors_ref.ADVICE): {no_advice}"


class _MetricCalls(ast.NodeVisitor):
    """Every log_metric(s) call, under its innermost function, with its constant keys."""

    def __init__(self, file: str) -> None:
        self.file, self.stack, self.found = file, [], []

    def visit_FunctionDef(self, node) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        attr = getattr(node.func, "attr", None)
        if attr in ("log_metric", "log_metrics") and node.args and self.stack:
            arg = node.args[0]
            candidates = [arg] if attr == "log_metric" else getattr(arg, "keys", [])
            keys = [k.value for k in candidates
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)]  # fmt: skip
            self.found.append((self.file, self.stack[-1], keys))
        self.generic_visit(node)


def _metric_calls() -> list[tuple[str, str, list[str]]]:
    """(file, function, constant key strings) of every log_metric(s) call in the code."""
    out = []
    for path in source_files():
        visitor = _MetricCalls(path.relative_to(ROOT).as_posix())
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        out += visitor.found
    return out


def test_every_metric_call_and_name_is_in_the_reference(pages):
    calls = _metric_calls()
    assert len(calls) >= 15
    page = pages["metrics"]
    for file, function, keys in calls:
        assert f"`{file}` `{function}`" in page, f"metrics of {file} {function} are not listed"
        for key in keys:
            assert f"`{key}`" in page, f"metric {key} ({file} {function}) is not listed"
    assert metrics_ref.problems() == []


def test_every_gymflow_variable_is_in_the_reference(pages):
    names = set()
    for path in source_files():
        names |= set(
            re.findall(r"\bGYMFLOW_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8"))
        )
    names -= set(env_vars_ref.NOT_VARIABLES)
    assert {"GYMFLOW_HOME", "GYMFLOW_ENV_TOKEN", "GYMFLOW_FAIL_AT"} <= names
    missing = [n for n in sorted(names) if f"| `{n}` |" not in pages["env"]]
    assert not missing, f"GYMFLOW_* variables missing from the reference: {missing}"
    assert env_vars_ref.problems() == []


# --- the README -------------------------------------------------------------------------


def _block_after(text: str, heading: str) -> list[str]:
    """The lines of the first fenced code block after ``heading``."""
    rest = text.split(heading, 1)[1]
    block = rest.split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def test_readme_is_a_front_door_of_at_most_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_readme_commands_are_the_makefile_targets_and_ci_runs_the_test_one():
    text = README.read_text(encoding="utf-8")
    commands = [line.split("#")[0].strip() for line in _block_after(text, "## The two commands")]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for command in commands:
        target = command.split()[1]
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"no Makefile target {target}"
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict" in test_recipe and "pytest" in test_recipe
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    steps = [s for s in ci if s.strip() and not s.startswith(("#", "set ", "cd "))]
    assert steps == ["make test"], f".ci/run must run exactly the README's test command: {steps}"


def test_readme_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert local, "the README links into the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


# --- commands written in the docs exist -------------------------------------------------

_GYMFLOW = re.compile(r"(?:^|[\s(])(?:\.venv/bin/)?gymflow ([a-z][^\n]*)")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")


def _documented_commands() -> list[tuple[str, str]]:
    """(file, command line) for every ``gymflow …`` written as code (a shell block or an
    inline span; ``text`` blocks show output) in the README, DEVELOPERS.md and the docs."""
    files = [README, ROOT / "DEVELOPERS.md", *sorted((ROOT / "docs").rglob("*.md"))]
    out = []
    for path in files:
        if path.name == "tuning.md":  # a dated log: its commands are those of their day
            continue
        text = path.read_text(encoding="utf-8")
        snippets = [line for lang, block in _FENCE.findall(text) if lang in ("bash", "sh", "")
                    for line in block.splitlines()]  # fmt: skip
        snippets += _INLINE.findall(_FENCE.sub("", text))
        for snippet in snippets:
            for match in _GYMFLOW.finditer(snippet):
                out.append((path.relative_to(ROOT).as_posix(), match.group(1)))
    return out


def test_commands_in_the_docs_exist_with_their_options():
    by_path = {c.path: c for c in cli_ref.commands()}
    groups = {p.split()[0] for p in by_path if " " in p}
    problems = []
    for file, line in _documented_commands():
        line = re.split(r"&&|\|\||;|\||#", line)[0]
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        if not words or (words[0] not in groups and words[0] not in by_path):
            if words and re.fullmatch(r"[a-z][a-z-]*", words[0]) and words[0] not in {"run", "ui"}:
                problems.append(f"{file}: gymflow {words[0]} is no command")
            continue
        path = words[0]
        if path in groups and len(words) > 1 and f"{path} {words[1]}" in by_path:
            path = f"{path} {words[1]}"
        if path not in by_path:
            continue  # a group named in prose ("gymflow env")
        names = {n for p in by_path[path].params for n in p.names} | {"--help"}
        for word in words:
            option = word.split("=")[0]
            if option.startswith("--") and option not in names:
                problems.append(f"{file}: gymflow {path} has no option {option}")
    assert not problems, "\n".join(sorted(set(problems)))
