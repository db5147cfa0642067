"""Environment projects found where they lie: the home's sub-folders and ``GYMFLOW_ENV_PATH``
(:mod:`gymflow.env.registry`), with ``gymflow env list`` saying where each comes from and
marking one whose code is gone; nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))


def gymflow(*args: str, cwd: Path, env_path: Path | None = None) -> subprocess.CompletedProcess:
    import os

    env = os.environ | {"GYMFLOW_HOME": str(cwd)}
    env.pop("GYMFLOW_ENV_PATH", None)
    if env_path is not None:
        env["GYMFLOW_ENV_PATH"] = str(env_path)
    return subprocess.run(
        [GYMFLOW, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """``gymflow env new words --kind text --dir elsewhere/words`` (outside any home)."""
    work = tmp_path_factory.mktemp("scaffold")
    made = gymflow("env", "new", "words", "--kind", "text", "--dir", "elsewhere/words", cwd=work)
    assert made.returncode == 0, made.stderr
    assert f"export GYMFLOW_ENV_PATH={work / 'elsewhere'}" in made.stdout  # not in the home
    return work / "elsewhere" / "words"


def _rows(listed: subprocess.CompletedProcess) -> dict[str, list[str]]:
    return {line.split("\t")[0]: line.split("\t") for line in listed.stdout.splitlines()}


def test_a_project_on_the_env_path_is_listed_and_checked(project, tmp_path):
    listed = gymflow("env", "list", cwd=tmp_path, env_path=project.parent)
    assert listed.returncode == 0, listed.stderr
    assert _rows(listed)["words"][4] == f"project {project} (words:WordsEnvironment)"
    checked = gymflow("env", "check", "words", "--n", "30", cwd=tmp_path, env_path=project)
    assert checked.returncode == 0 and "0 problems" in checked.stdout, checked.stdout
    assert "words" not in _rows(gymflow("env", "list", cwd=tmp_path))  # off the path: not there


def test_a_project_whose_code_is_gone_is_marked_missing(project, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(project, broken)
    shutil.rmtree(broken / "words")  # the package folder, pyproject.toml left behind
    listed = gymflow("env", "list", cwd=tmp_path)  # found in the home's sub-folders
    assert listed.returncode == 1
    row = _rows(listed)["words"]
    assert row[1] == "missing" and f"its folder {broken} no longer holds it" in row[2]
    assert {"counter", "tool_call"} <= set(_rows(listed))  # the others are still listed
