"""Every benchmark script still imports: a module moved or renamed in the package must not leave
a benchmark that fails only when someone runs it weeks later."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.stem)
def test_benchmark_imports(script):
    namespace = runpy.run_path(str(script), run_name="imported_by_test")  # main() not called
    assert namespace["__doc__"], f"{script.name} says what it measures in its docstring"
