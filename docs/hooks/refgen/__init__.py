"""Reference pages generated from the code at build time (``docs/hooks/reference_pages.py``).

Each module renders one page from what the code holds — the config models, the CLI's command
tree, the failure kinds, the metrics the stages log, the ``GYMFLOW_*`` variables the code reads —
so the reference cannot drift from the code. Text the code cannot hold (what to do about an
error kind, what a variable is for) sits beside the generator, keyed by the name the code uses;
a name found in the code without that text is reported by :func:`problems` of its module, which
the hook turns into a build warning (``mkdocs build --strict`` fails on it).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
"""The repository root (``docs/hooks/refgen/`` is three levels below it)."""

SOURCE_DIRS = ("gymflow", "cli", "flows", "tasks", "deployments", "environments")
"""The folders whose Python files are the product's code (their ``tests/`` folders excluded)."""


def source_files() -> list[Path]:
    """Every Python file of the product's code, tests excluded, in a stable order."""
    out = []
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or any(p.startswith(".") for p in parts):
                continue
            out.append(path)
    return out


def prose(text: str) -> str:
    """Help text as markdown: ``<`` / ``>`` outside code spans shown as themselves."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def cell(text: object) -> str:
    """Text safe inside a markdown table cell: pipes escaped, lines joined, and ``<`` / ``>``
    outside code spans shown as themselves (``<home>`` is no HTML tag)."""
    return prose(" ".join(str(text).split()).replace("|", "\\|"))


def code(text: object) -> str:
    """Inline code safe inside a table cell."""
    value = str(text).replace("|", "\\|")
    return f"``{value}``" if "`" in value else f"`{value}`"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rel(path: Path) -> str:
    """A path relative to the repository root, for the pages."""
    return path.resolve().relative_to(ROOT).as_posix()
