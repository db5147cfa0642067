"""Find environments by name: the in-repo folder, environment projects on disk, installed plugins.

An environment is an :class:`~gymflow.env.environment.Environment` subclass with a ``name``.
Three places provide them:

* the project's ``environments/<name>/`` folder (installed as ``gymflow.environments``): each
  sub-package exposes one subclass whose ``name`` is the folder's name;
* **environment projects on disk**, found without installing anything: a folder with a
  ``pyproject.toml`` that declares entry points in the group ``gymflow.environments`` (what
  ``gymflow env new`` writes). gymflow looks in the home's immediate sub-folders and in each
  folder of ``GYMFLOW_ENV_PATH`` (``os.pathsep``-separated; a project folder itself or a
  folder of them). Importing one puts its folder on ``sys.path`` and on ``PYTHONPATH``, so
  the processes gymflow starts (verifier pools, the SFT control, trainers) import it too;
* any installed distribution that declares an entry point in the group ``gymflow.environments``
  (``my_env = "my_package:MyEnvironment"``, or a module that exposes one subclass), so
  ``pip install my-env-package`` makes ``gymflow env list`` show it.

A name found in two places is an error (two environments must not answer to one name), except
a project on disk that is also installed from the same folder (an editable install).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.paths import project_home
from gymflow.env.environment import Environment

ENTRY_POINT_GROUP = "gymflow.environments"
IN_REPO_PACKAGE = "gymflow.environments"
ENV_PATH_VARIABLE = "GYMFLOW_ENV_PATH"


@dataclass(frozen=True)
class Source:
    """Where an environment comes from: its ``module[:attr]``, the kind of place and, for a
    project on disk or an installed package, the folder or distribution it is in."""

    target: str
    kind: str
    """``in-repo``, ``project`` (a folder on disk) or ``installed`` (a distribution)."""
    where: str = ""
    folder: Path | None = None
    """A project's folder (put on the import path before importing it)."""

    def describe(self) -> str:
        return f"{self.kind} {self.where}".strip() + f" ({self.target})"


def list_envs() -> list[str]:
    """Every environment name, in-repo and installed, sorted."""
    return sorted(_sources())


def env_source(name: str) -> str:
    """Where ``name`` comes from, in words: ``in-repo``, ``project FOLDER`` or ``installed
    DIST``, with the ``module[:attr]`` it is imported from."""
    return _lookup(name).describe()


def env_sources() -> dict[str, Source]:
    """Every environment's :class:`Source`, by name."""
    return dict(_sources())


def get_env(name: str) -> Environment:
    """Instantiate the environment called ``name``; ``bad_request`` naming the known ones."""
    source = _lookup(name)
    target = source.target
    module_name, _, attr = target.partition(":")
    if source.folder is not None:
        _on_import_path(source.folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fix = (
            f"its folder {source.where} no longer holds it"
            if source.kind == "project"
            else f"its package {source.where} is installed but its code is gone or broken: "
            f"reinstall it or `pip uninstall {source.where}`"
            if source.kind == "installed"
            else "reinstall gymflow"
        )
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"environment {name!r} ({target}) cannot be imported: {exc}; {fix}",
        ) from None
    found = getattr(module, attr, None) if attr else _subclass_in(module, name)
    if not (isinstance(found, type) and issubclass(found, Environment)):
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{target} is not an Environment subclass named {name!r}",
        )
    if found.name != name:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{target} is named {found.name!r}, but is registered as {name!r}",
        )
    return found()


def _lookup(name: str) -> Source:
    sources = _sources()
    if name not in sources:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"unknown environment {name!r}; known: {', '.join(sorted(sources))}",
        )
    return sources[name]


def _sources() -> dict[str, Source]:
    found = dict(_installed_sources())
    for name, source in _project_sources().items():
        known = found.get(name)
        if known is not None and not _same_place(known, source):
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"two environments are named {name!r}: {known.describe()} and "
                f"{source.describe()}; rename one",
            )
        found[name] = source
    return found


@cache
def _installed_sources() -> dict[str, Source]:
    package = importlib.import_module(IN_REPO_PACKAGE)
    found = {
        m.name: Source(f"{IN_REPO_PACKAGE}.{m.name}", "in-repo")
        for m in pkgutil.iter_modules(package.__path__)
        if m.ispkg
    }
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else "an installed package"
        if ep.name in found and found[ep.name].target != ep.value:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"two environments are named {ep.name!r}: {found[ep.name].target} and "
                f"{ep.value} (entry point of {dist})",
            )
        found[ep.name] = Source(ep.value, "installed", dist)
    return found


def clear_cache() -> None:
    """Forget what was found (after a new project is written, or a plugin installed)."""
    _installed_sources.cache_clear()
    _projects_in.cache_clear()


def _project_sources() -> dict[str, Source]:
    """Environment projects on disk: the home's sub-folders and ``GYMFLOW_ENV_PATH``'s."""
    roots = [project_home()]
    roots += [Path(p) for p in os.environ.get(ENV_PATH_VARIABLE, "").split(os.pathsep) if p]
    return _projects_in(tuple(roots))


@cache
def _projects_in(roots: tuple[Path, ...]) -> dict[str, Source]:
    found: dict[str, Source] = {}
    for root in roots:
        for folder in [root, *_children(root)]:
            for name, target in _declared(folder / "pyproject.toml").items():
                found.setdefault(name, Source(target, "project", str(folder), folder))
    return found


def _children(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:  # a GYMFLOW_ENV_PATH folder that does not exist: nothing there
        return []


def _declared(pyproject: Path) -> dict[str, str]:
    """The ``gymflow.environments`` entry points a ``pyproject.toml`` declares (none if it
    cannot be read: a project of another kind is not an error)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    points = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return {k: v for k, v in points.items() if isinstance(k, str) and isinstance(v, str)}


def _same_place(installed: Source, project: Source) -> bool:
    """An editable install of the project on disk: one environment, not two."""
    if installed.target != project.target:
        return False
    module = installed.target.partition(":")[0].split(".")[0]
    spec = importlib.util.find_spec(module) if installed.kind == "installed" else None
    origin = Path(spec.origin).resolve() if spec and spec.origin else None
    return origin is not None and project.folder.resolve() in origin.parents


def _on_import_path(folder: Path) -> None:
    """Make ``folder`` importable here and in every process started from here."""
    text = str(folder.resolve())
    if text not in sys.path:
        sys.path.insert(0, text)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if text not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([text, *parts])


def _subclass_in(module, name: str) -> type | None:
    for obj in vars(module).values():
        if isinstance(obj, type) and issubclass(obj, Environment) and obj.name == name:
            return obj
    return None
