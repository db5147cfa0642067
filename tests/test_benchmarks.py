"""The benchmark suite holds together: every benchmark imports for real (a module renamed in the
package fails here, not weeks later when someone runs it), has its current result in the one
schema and its row in ``benchmarks/README.md``, and runs end to end with ``--smoke``.

``--smoke`` is each script's smallest sizes that still run every code path; its figures mean
nothing. A benchmark without a cheap smoke mode is listed in ``NO_SMOKE`` with the reason.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
AREAS = ("lifecycle", "training", "env", "eval", "scale")

FOLDERS = sorted(p for area in AREAS for p in (BENCHMARKS / area).iterdir() if p.is_dir())
SCRIPTS = [f / f"{f.name}.py" for f in FOLDERS if (f / f"{f.name}.py").exists()]

SMOKE = ["agent_server", "code_env", "workplace_env", "cli_start", "gate", "collector",
         "math_env", "load", "dedup"]  # fmt: skip
"""Benchmarks whose smoke run takes seconds: run by the default test."""

SMOKE_SLOW = ["env_server", "decode_cache", "shared_prefix", "shared_prompt", "verifier_profile",
              "arms"]  # fmt: skip
"""Smoke runs of 15–35 s each (a tiny model built and trained, servers started): marked slow."""

NO_SMOKE = {
    "default_seeds": "whole lifecycles; --smoke is one seed on the lifecycle's smoke budget (minutes)",
    "lifecycle": "a whole lifecycle in a fresh home (minutes)",
    "grpo_from_starts": "needs finished run folders to start from",
    "where_grpo_pays": "needs finished run folders to read",
    "grpo_vs_control": "SFT, GRPO and the control of a real run config (minutes to hours)",
    "real_model": "needs SmolLM2-135M (make fetch-model) and minutes per part",
    "ddp": "accelerate launches two training processes per stage (a minute or more)",
    "cpu_wait_policy": "trains the default's shapes four times at fixed sizes (minutes)",
    "grpo_step": "builds and SFT-trains the tiny model it times (minutes on first use)",
    "eval": "evaluates 500 tasks greedy and 200 at pass@8 at fixed sizes",
    "scale": "starts a Ray cluster",
    "ray_verify": "starts a Ray cluster",
    "make_run": "times `make run` in a fresh clone (no script: the command is the benchmark)",
    "make_test": "times `make test` in a fresh clone (no script: the command is the benchmark)",
    "team_stack": "starts PostgreSQL, the MLflow and Prefect servers and runs two smoke lifecycles",
}
"""Benchmarks the test only imports, and why."""


def _module(script: Path) -> str:
    return ".".join(script.relative_to(ROOT).with_suffix("").parts)


def test_at_most_fifteen_entries_under_benchmarks():
    entries = [p.name for p in BENCHMARKS.iterdir() if not p.name.startswith((".", "__"))]
    assert len(entries) <= 15, sorted(entries)


def test_every_benchmark_is_smoked_or_says_why_not():
    names = {f.name for f in FOLDERS}
    assert names == set(SMOKE) | set(SMOKE_SLOW) | set(NO_SMOKE), names ^ (
        set(SMOKE) | set(SMOKE_SLOW) | set(NO_SMOKE)
    )


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_benchmark_has_one_current_result_and_a_readme_row(folder):
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    for key in ("benchmark", "measures", "command", "date", "commit", "machine", "figures"):
        assert key in result, f"{folder.name}/result.json lacks {key}"
    assert result["benchmark"] == folder.name
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    assert f"`{folder.relative_to(BENCHMARKS).as_posix()}/`" in readme, (
        f"no README row: {folder.name}"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_benchmark_imports(script):
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT))  # ``benchmarks`` is a namespace package at the root
    try:
        module = importlib.import_module(_module(script))  # main() not called
    finally:
        sys.path[:] = saved
    assert module.__doc__, f"{script.name} says what it measures in its docstring"
    assert hasattr(module, "main"), f"{script.name} has a main()"


def _smoke(name: str, tmp_path: Path) -> dict:
    (script,) = [s for s in SCRIPTS if s.stem == name]
    out = tmp_path / "out.json"
    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    for key in [k for k in env if k.startswith(("PREFECT_", "MLFLOW_"))]:
        del env[key]
    done = subprocess.run(
        [sys.executable, str(script), "--smoke", "--json", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["host"]["cores"] >= 1 and "flags" in result["host"]
    return result


@pytest.mark.parametrize("name", SMOKE)
def test_smoke(name, tmp_path):
    _smoke(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", SMOKE_SLOW)
def test_smoke_slow(name, tmp_path):
    _smoke(name, tmp_path)
