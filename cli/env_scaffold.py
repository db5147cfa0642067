"""``gymflow env new NAME``: write an environment project that gymflow finds where it lies.

The project (:mod:`gymflow.cli.env_template`, a tool-using task; or, with ``--kind text``,
:mod:`gymflow.cli.env_template_text`, a plain-text one) is a working environment: it passes
``gymflow env check NAME``, its own tests and ``gymflow run --smoke --set env=NAME`` as written.
After the files, its ``examples/`` are written by playing five tasks through the in-process
server (the module is imported from the new folder).

Nothing is installed: gymflow finds an environment project by its ``pyproject.toml`` entry
point in the home's sub-folders and in ``GYMFLOW_ENV_PATH`` (:mod:`gymflow.env.registry`), so
gymflow's own Python stays as it was and edits take effect at once. ``install=True`` also
installs it in editable mode into the Python that runs gymflow (``pip install --no-deps
--no-build-isolation -e``: offline), for a project that lives elsewhere for good.
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


KINDS = ("tools", "text")
"""What ``--kind`` may be: a tool-using task (the default) or a plain-text one."""


@dataclass(frozen=True)
class Scaffold:
    name: str
    folder: Path
    files: list[Path]
    installed: bool
    found_by: str
    """How gymflow finds it: ``the home`` or ``GYMFLOW_ENV_PATH`` (what to set), or the install."""


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


def new_environment(
    name: str, folder: Path, install: bool = False, kind: str = "tools"
) -> Scaffold:
    """Write the project for ``name`` into ``folder`` (new or empty) and its examples, and
    install it when ``install``; what was written and how gymflow finds it."""
    if kind not in KINDS:
        raise GymflowError(FailureKind.BAD_REQUEST, f"--kind {kind!r}: one of {', '.join(KINDS)}")
    if kind == "text":
        from gymflow.cli.env_template_text import FILES
    else:
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
    from gymflow.env import registry

    registry.clear_cache()
    return Scaffold(name, folder, written, install, _found_by(name, folder, install))


def _found_by(name: str, folder: Path, installed: bool) -> str:
    """How gymflow will find the new project, in words (what to set when it will not)."""
    from gymflow.core.paths import project_home
    from gymflow.env.registry import ENV_PATH_VARIABLE, env_sources

    source = env_sources().get(name)
    if installed:
        return "installed (editable) into this Python"
    if source is not None and source.kind == "project":
        home = project_home()
        where = "the home" if folder.resolve().parent == home else ENV_PATH_VARIABLE
        return f"found in {where} ({folder.resolve()})"
    parent = folder.resolve().parent
    return (
        f"not found from here: `export {ENV_PATH_VARIABLE}={parent}` (or run gymflow from "
        f"{parent}, or `pip install -e {folder}`)"
    )


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
