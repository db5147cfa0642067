"""A Python environment of a user's own for tests that run gymflow's commands as typed: a venv
that sees gymflow's installed packages through a ``.pth`` line, with its own ``gymflow``
script, so what a command installs or writes there never reaches the project's venv."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture
def user_venv(tmp_path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    main_site = sysconfig.get_paths()["purelib"]  # gymflow and its dependencies, as installed
    (site / "gymflow_main.pth").write_text(f"import site; site.addsitedir({main_site!r})\n")
    script = venv / "bin" / "gymflow"  # what pip writes for a console script
    script.write_text(
        f"#!{venv}/bin/python\nimport sys\nfrom gymflow.cli.main import app\n"
        "if __name__ == '__main__':\n    sys.exit(app())\n"
    )
    script.chmod(0o755)
    return venv
