"""Figures from one source: the numbers pages quote are read from the benchmarks' result files.

Every benchmark keeps one current result, ``benchmarks/<area>/<name>/result.json``, in one
schema: ``benchmark`` (its name), ``measures``, ``command``, ``date``, ``commit``, ``machine``
and ``figures``, a mapping of figure names to ``{"value": ..., "unit": ...}`` (a figure measured
on another occasion than the file's carries its own ``date``, ``commit`` and ``machine``).

In a page, ``{{ figure:default_seeds.grpo_minus_control }}`` is replaced at build time by that
figure as text (``+1.9 [−1.7, +5.4]``); an unknown name is a build warning, so
``mkdocs build --strict`` fails on it. The README is read on the repository host, where nothing
runs, so it carries the literal text followed by a marker, ``+1.9 [−1.7, +5.4]<!-- figure:
default_seeds.grpo_minus_control -->``; ``tests/test_docs_figures.py`` checks every marked text
against its source, and ``python docs/hooks/figures.py --write README.md`` rewrites them.

How a value reads, by its ``unit``: ``s`` as ``9 min 6 s``; ``points`` as ``+1.9`` or, for
``[mean, low, high]``, ``+1.9 [−1.7, +5.4]``; ``points_range`` ``[low, high]`` as
``+15.7 to +30.6``; ``count`` as ``1,311``; ``GiB`` as ``3.1 GiB``; ``seconds`` and ``ms`` as
``0.153 s`` and ``2 ms``; ``per_s`` as ``1,543/s``; ``x`` (a speed-up) as ``3.94×``; ``share``
(0–1) as ``2.4 %``; anything else as written.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.figures")

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``docs/hooks/`` is two levels below it)."""

PLACEHOLDER = re.compile(r"\{\{\s*figure:([\w.]+)\s*\}\}")
"""A figure in a docs page: ``{{ figure:NAME }}``."""

MARKED = re.compile(r"(?P<text>[^\n<>]*?)<!-- figure:(?P<name>[\w.]+) -->")
"""A figure in the README: its literal text, then ``<!-- figure:NAME -->``."""

MINUS = "\u2212"


def result_files(root: Path = ROOT) -> list[Path]:
    """Every benchmark's current result file, in a stable order."""
    return sorted((root / "benchmarks").glob("**/result.json"))


def load(root: Path = ROOT) -> dict[str, dict]:
    """Every figure by its name (``<benchmark>.<figure>``), each with the ``source`` file and the
    ``date``, ``commit`` and ``machine`` it was measured with."""
    figures: dict[str, dict] = {}
    for path in result_files(root):
        result = json.loads(path.read_text(encoding="utf-8"))
        for key, figure in result.get("figures", {}).items():
            name = f"{result['benchmark']}.{key}"
            if name in figures:
                raise ValueError(f"figure {name} is in {figures[name]['source']} and {path}")
            figures[name] = (
                {
                    "date": result.get("date"),
                    "commit": result.get("commit"),
                    "machine": result.get("machine"),
                    "command": result.get("command"),
                }
                | figure
                | {"source": path.relative_to(root).as_posix()}
            )
    return figures


def _fixed(value: float, signed: bool) -> str:
    text = str(Decimal(str(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    if text.startswith("-"):
        return MINUS + text[1:]
    return ("+" if signed else "") + text


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    minutes, rest = divmod(seconds, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def text(figure: dict) -> str:
    """A figure as pages print it (see the module docstring for each unit)."""
    value, unit = figure["value"], figure.get("unit")
    if unit == "s":
        return _duration(value)
    if unit == "points":
        if isinstance(value, list):
            mean, low, high = value
            return f"{_fixed(mean, True)} [{_fixed(low, True)}, {_fixed(high, True)}]"
        return _fixed(value, True)
    if unit == "points_range":
        low, high = value
        return f"{_fixed(low, True)} to {_fixed(high, True)}"
    if unit == "count":
        return f"{int(value):,}"
    if unit == "GiB":
        return f"{_fixed(value, False)} GiB"
    if unit == "seconds":
        return f"{value:g} s"
    if unit == "ms":
        return f"{value:g} ms"
    if unit == "per_s":
        return f"{value:,.0f}/s" if value >= 100 else f"{value:g}/s"
    if unit == "x":
        return f"{value:g}\u00d7"
    if unit == "share":
        return f"{_fixed(100 * value, False)} %"
    return str(value)


def render(markdown: str, figures: dict[str, dict]) -> tuple[str, list[str]]:
    """``markdown`` with every ``{{ figure:NAME }}`` replaced, and the names not found."""
    unknown: list[str] = []

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in figures:
            unknown.append(name)
            return match.group(0)
        return text(figures[name])

    return PLACEHOLDER.sub(replace, markdown), unknown


def marked(markdown: str) -> list[tuple[str, str]]:
    """The README's marked figures: ``(name, the text written before the marker)``. The text is
    what follows the last sentence break or table cell before the marker, so write the figure
    right before it (``9 min 6 s<!-- figure:make_run.avx2 -->``)."""
    return [(m.group("name"), m.group("text")) for m in MARKED.finditer(markdown)]


_SHAPES = {
    "s": r"(?:\d+ min(?: \d+ s)?|\d+ s)",
    "points": r"[+\u2212-]?\d[\d.]*(?: \[[+\u2212-]?\d[\d.]*, [+\u2212-]?\d[\d.]*\])?",
    "points_range": r"[+\u2212-]?\d[\d.]* to [+\u2212-]?\d[\d.]*",
    "count": r"\d[\d,]*",
    "GiB": r"\d[\d.]* GiB",
    "seconds": r"\d[\d.]* s",
    "ms": r"\d[\d.]* ms",
    "per_s": r"\d[\d.,]*/s",
    "x": r"\d[\d.]*\u00d7",
    "share": r"[+\u2212-]?\d[\d.]* %",
}
"""What a figure of each unit looks like in text, to find it right before its marker."""


def _written(before: str, figure: dict) -> re.Match | None:
    shape = _SHAPES.get(figure.get("unit"), r"\S+")
    return re.search(f"{shape}$", before)


def check_marked(markdown: str, figures: dict[str, dict]) -> list[str]:
    """Problems of the README's marked figures: unknown names, texts that are not the figure's."""
    problems = []
    for name, before in marked(markdown):
        if name not in figures:
            problems.append(f"{name}: no such figure in benchmarks/**/result.json")
            continue
        found = _written(before, figures[name])
        expected = text(figures[name])
        if not found or found.group(0) != expected:
            written = found.group(0) if found else before.strip()[-30:]
            problems.append(
                f"{name}: the text reads {written!r}, its source "
                f"({figures[name]['source']}) says {expected!r}"
            )
    return problems


def write_marked(markdown: str, figures: dict[str, dict]) -> str:
    """``markdown`` with each marked figure's text replaced by its source's."""
    out, last = [], 0
    for m in MARKED.finditer(markdown):
        figure = figures.get(m.group("name"))
        found = _written(m.group("text"), figure) if figure else None
        if not found:
            continue
        out.append(markdown[last : m.start("text") + found.start()])
        out.append(text(figure))
        last = m.end("text")
    out.append(markdown[last:])
    return "".join(out)


# --- the mkdocs hook ---------------------------------------------------------------------------

_FIGURES: dict[str, dict] | None = None


def on_config(config):
    global _FIGURES
    _FIGURES = load()
    return config


def on_page_markdown(markdown, page, config, files):
    """Every ``{{ figure:NAME }}`` of a page replaced by its figure; an unknown one warned."""
    figures = _FIGURES if _FIGURES is not None else load()
    markdown, unknown = render(markdown, figures)
    for name in unknown:
        log.warning(
            "figures: %s names %s, which no benchmarks/**/result.json holds",
            page.file.src_uri,
            name,
        )
    return markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[ROOT / "README.md"])
    parser.add_argument("--write", action="store_true", help="rewrite the marked figures")
    parser.add_argument("--list", action="store_true", help="print every figure and its text")
    args = parser.parse_args(argv)
    figures = load()
    if args.list:
        for name, figure in sorted(figures.items()):
            print(f"{name}\t{text(figure)}\t{figure['source']}")
        return 0
    status = 0
    for path in args.files:
        markdown = path.read_text(encoding="utf-8")
        if args.write:
            path.write_text(write_marked(markdown, figures), encoding="utf-8")
            markdown = path.read_text(encoding="utf-8")
        for problem in check_marked(markdown, figures):
            print(f"{path}: {problem}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
