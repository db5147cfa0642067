"""``gymflow env new NAME``: write an installable environment package, then install it.

The package (:mod:`gymflow.cli.env_template`) is a working environment: it passes ``gymflow
env check NAME``, its own tests and ``gymflow run --smoke --set env=NAME`` as written. After the
files, its ``examples/`` are written by playing five tasks through the in-process server (the
module is imported from the new folder), and the package is installed in editable mode into
the Python that runs gymflow (``pip install --no-deps --no-build-isolation -e``: offline, no
index needed), so its ``gymflow.environments`` entry point makes gymflow find it — nothing in
gymflow's own folders changes. Edits to the folder take effect without reinstalling.
"""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from string import Template

from gymflow.core.failures import FailureKind, GymflowError

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,39}")


@dataclass(frozen=True)
class Scaffold:
    name: str
    folder: Path
    files: list[Path]
    installed: bool


def check_name(name: str) -> None:
    """``bad_request`` unless ``name`` can be a package, an entry point and a new environment."""
    if not NAME_PATTERN.fullmatch(name) or keyword.iskeyword(name):
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{name!r} is not a usable environment name: 2-40 characters of a-z, 0-9 and _, "
            "starting with a letter (it becomes a Python package name), e.g. my_env",
        )
    from gymflow.env.registry import list_envs

    if name in list_envs():
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"an environment {name!r} exists already; choose another name"
        )
    if importlib.util.find_spec(name) is not None:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{name!r} is already an importable Python module here; choose another name",
        )


def render(text: str, name: str) -> str:
    cls = "".join(part.capitalize() for part in name.split("_")) + "Environment"
    try:
        gymflow = version("gymflow")
    except PackageNotFoundError:
        gymflow = "0.1"
    return Template(text).substitute(
        name=name, cls=cls, dist=name.replace("_", "-"), gymflow=gymflow
    )


def new_environment(name: str, folder: Path, install: bool = True) -> Scaffold:
    """Write the package for ``name`` into ``folder`` (new or empty), its examples, and
    install it unless ``install`` is False; what was written."""
    from gymflow.cli.env_template import FILES

    check_name(name)
    if folder.exists() and any(folder.iterdir()):
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"{folder} exists and is not empty; choose another --dir"
        )
    written = []
    for relative, text in FILES.items():
        path = folder / render(relative, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(text, name), encoding="utf-8")
        written.append(path)
    written += _write_examples(name, folder)
    if install:
        _install(folder)
    return Scaffold(name, folder, written, install)


def _write_examples(name: str, folder: Path) -> list[Path]:
    """Import the new package from ``folder`` and play its examples (``make_examples``)."""
    import contextlib
    import io

    sys.path.insert(0, str(folder.resolve()))
    try:
        module = importlib.import_module(f"{name}.make_examples")
        with contextlib.redirect_stdout(io.StringIO()):  # its per-episode lines
            module.main()
    finally:
        sys.path.remove(str(folder.resolve()))
        for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[loaded]
    return [folder / name / "examples" / f for f in ("tasks.jsonl", "rollouts.jsonl")]


def _install(folder: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
        "--editable", str(folder.resolve()),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise GymflowError(
            FailureKind.INTERNAL_ERROR,
            f"pip could not install {folder} ({last[0]}); the files are there: install them "
            f"with `{sys.executable} -m pip install -e {folder}`",
        )
