"""The tutorial (``docs/tutorials/first-environment.md``) works as written.

Its blocks are played in order in an empty folder, as a reader would: a ``python`` block with a
``title="PATH"`` is written to that file, a ``bash`` block is run, a ``python`` block without a
title is run with the environment's Python; ``text`` blocks are what the reader should see, and
the ``gymflow env check`` line is compared with the one the page shows. The commands run in a
Python environment of their own (a venv that sees gymflow's installed packages through a
``.pth`` line), so the scaffold's editable install never lands in the project's venv.

The fast test plays everything up to the lifecycle run (scaffold, code, unit tests, env check,
examples); the slow one plays the whole page, the smoke lifecycle and the report included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import user_venv as venvs  # tests/ is on the path: the user_venv fixture

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorials" / "first-environment.md"
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```\n', re.S | re.M)
LIFECYCLE = "gymflow run --smoke"

user_venv = venvs.user_venv


def blocks() -> list[tuple[str, str | None, str]]:
    """``(language, title, body)`` of every fenced block of the page, in order."""
    return [m.groups() for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))]


def _outputs_ref():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from refgen import outputs_ref
    finally:
        sys.path.pop(0)
    return outputs_ref


def play(work: Path, venv: Path, *, through_lifecycle: bool) -> list[str]:
    """Play the page's blocks in ``work``; the outputs of the commands, in order."""
    env = os.environ | {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "GYMFLOW_HOME": str(work)}
    for name in [n for n in env if n.startswith(("PREFECT_", "MLFLOW_", "GYMFLOW_PROGRESS"))]:
        del env[name]  # settings this pytest process may hold for another home
    outputs = []
    for language, title, body in blocks():
        if language == "bash" and LIFECYCLE in body and not through_lifecycle:
            break
        if language == "python" and title:
            path = work / title
            assert path.parent.is_dir(), f"{title}: the scaffold has no such folder"
            path.write_text(body, encoding="utf-8")
            continue
        if language == "bash":
            command = ["bash", "-euo", "pipefail", "-c", body]
        elif language == "python":
            command = [str(venv / "bin" / "python"), "-c", body]
        else:
            continue
        done = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=1500
        )
        assert done.returncode == 0, f"{body}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    return outputs


def _shown_check_line() -> str:
    texts = [body for language, _, body in blocks() if language == "text"]
    return next(t for t in texts if "gold episodes" in t).strip()


def test_the_environment_steps_work_as_written(tmp_path, user_venv):
    work = tmp_path / "work"
    work.mkdir()
    outputs = "\n".join(play(work, user_venv, through_lifecycle=False))
    assert "unit_convert: 10 files in" in outputs
    assert "5 passed" in outputs
    assert _shown_check_line() in outputs, "the page shows another `gymflow env check` line"
    examples = work / "unit_convert" / "unit_convert" / "examples" / "tasks.jsonl"
    assert "conversion" in examples.read_text() or "Convert" in examples.read_text()
    assert not list(Path(sysconfig.get_paths()["purelib"]).glob("__editable__*unit_convert*"))


@pytest.mark.slow
def test_the_whole_tutorial_works_as_written(tmp_path, user_venv):
    work = tmp_path / "work"
    work.mkdir()
    outputs = play(work, user_venv, through_lifecycle=True)
    (run,) = (work / "runs").iterdir()
    assert "registered: gymflow-unit_convert" in outputs[-1]
    documented = set(_outputs_ref().RUN_FOLDER)
    entries = {p.name + ("/" if p.is_dir() else "") for p in run.iterdir()}
    assert entries <= documented, (
        f"run folder entries the outputs reference lacks: {entries - documented}"
    )
