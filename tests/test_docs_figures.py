"""Figures from one source: every figure the README, the docs home and Getting started quote is
its benchmark's current result, and the user pages carry no measurement history.

The docs pages write ``{{ figure:NAME }}``, which the site's hook (``docs/hooks/figures.py``)
replaces from ``benchmarks/**/result.json`` at build time; the README, read on the repository
host, writes the figure followed by ``<!-- figure:NAME -->``, checked here against the same
source. No page may quote those figures in any other way, or two pages could disagree again.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _figures_module():
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "docs/hooks/figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures_mod = _figures_module()
FIGURES = figures_mod.load()
README = (ROOT / "README.md").read_text(encoding="utf-8")

QUOTED_BY_README = {
    "default_seeds.delta_range",
    "default_seeds.grpo_minus_control",
    "make_run.avx2",
    "make_run.avx512",
    "make_test.avx2",
    "make_test.avx512",
    "make_run.peak_memory",
}
"""The figures the README's front door must quote, each marked with its source."""

PAGES_WITH_FIGURES = ("docs/index.md", "docs/getting-started.md", "docs/faq.md")
"""Pages that quote current figures: only through placeholders. (The Results log also uses
placeholders for its current figures, beside a history that keeps older ones by hand.)"""

USER_PAGES = (
    ["README.md", "docs/index.md", "docs/getting-started.md", "docs/install.md", "docs/faq.md",
     "docs/glossary.md", "docs/reference/index.md", "docs/reference/api.md"]
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/how-to").glob("*.md"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/tutorials").glob("*.md"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/concepts").glob("*.md"))
)  # fmt: skip
"""Pages that state what is true now; history lives in docs/results/ and docs/tuning.md."""

DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
HASH = re.compile(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])")
TRACKER = re.compile(r"\b[Ii]ssue \d+|#\d{2,}\b")


def test_every_result_file_has_the_schema():
    for path in figures_mod.result_files():
        result = __import__("json").loads(path.read_text(encoding="utf-8"))
        missing = {"benchmark", "measures", "command", "date", "commit", "machine", "figures"}
        missing -= set(result)
        assert not missing, f"{path.relative_to(ROOT)} lacks {sorted(missing)}"
        assert path.parent.name == result["benchmark"], f"{path} is in the wrong folder"
        for name, figure in result["figures"].items():
            assert "value" in figure, f"{path}: figure {name} has no value"


def test_readme_figures_match_their_source():
    assert figures_mod.check_marked(README, FIGURES) == []


def test_benchmark_readme_figures_match_their_source():
    readme = (ROOT / "benchmarks/README.md").read_text(encoding="utf-8")
    assert figures_mod.marked(readme), "benchmarks/README.md marks its current figures"
    assert figures_mod.check_marked(readme, FIGURES) == []


def test_readme_quotes_the_front_door_figures():
    quoted = {name for name, _ in figures_mod.marked(README)}
    assert quoted >= QUOTED_BY_README, f"not marked in README: {QUOTED_BY_README - quoted}"


def test_readme_output_is_the_recorded_one():
    block = README.split("```text\n", 1)[1].split("```", 1)[0]
    recorded = (ROOT / "benchmarks/lifecycle/make_run/output.txt").read_text(encoding="utf-8")
    assert block == recorded
    getting_started = (ROOT / "docs/getting-started.md").read_text(encoding="utf-8")
    assert '--8<-- "benchmarks/lifecycle/make_run/output.txt"' in getting_started


def test_every_placeholder_resolves():
    for page in sorted((ROOT / "docs").rglob("*.md")):
        _, unknown = figures_mod.render(page.read_text(encoding="utf-8"), FIGURES)
        assert unknown == [], f"{page.relative_to(ROOT)}: unknown figures {unknown}"


@pytest.mark.parametrize("page", PAGES_WITH_FIGURES)
def test_page_figures_are_not_copied_by_hand(page):
    markdown = (ROOT / page).read_text(encoding="utf-8")
    # A figure the source holds may appear only through its placeholder.
    for name, figure in FIGURES.items():
        text = figures_mod.text(figure)
        if len(text) >= 5 and not text.isdigit():
            assert text not in markdown, (
                f"{page} copies {name} ({text!r}) by hand: use {{{{ figure:{name} }}}}"
            )


def test_readme_is_a_front_door():
    lines = README.splitlines()
    assert len(lines) <= 90, f"README.md has {len(lines)} lines"


@pytest.mark.parametrize("page", USER_PAGES)
def test_user_pages_carry_no_history(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    found = DATE.findall(text) + HASH.findall(text) + TRACKER.findall(text)
    assert not found, f"{page}: dates, commit hashes or tracker numbers {found[:5]}"


def test_write_marked_restores_a_stale_figure():
    stale = README.replace(
        figures_mod.text(FIGURES["make_run.avx2"]) + "<!-- figure:make_run.avx2 -->",
        "99 min 1 s<!-- figure:make_run.avx2 -->",
    )
    assert figures_mod.check_marked(stale, FIGURES)
    assert figures_mod.write_marked(stale, FIGURES) == README
