"""The map is kept true: every package of the layering test, and every module of ``core/``
(where the domain's atoms sit beside shared infrastructure), is named on the layout page."""

from __future__ import annotations

from pathlib import Path

from layers import LAYERS  # tests/ is on the path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "concepts" / "layout.md").read_text(encoding="utf-8")


def test_every_layer_is_on_the_layout_page():
    missing = [name for name in LAYERS if f"`gymflow/{name}/`" not in PAGE]
    assert not missing, f"docs/concepts/layout.md does not name: {missing}"


def test_every_core_module_is_named():
    modules = [p.stem for p in (ROOT / "gymflow" / "core").glob("*.py") if p.stem != "__init__"]
    missing = [m for m in modules if f"`{m}`" not in PAGE]
    assert not missing, f"core modules the layout page does not name: {missing}"
