"""Find environments by name: the in-repo folder and installed plugins.

An environment is an :class:`~gymflow.env.environment.Environment` subclass with a ``name``.
Two places provide them:

* the project's ``environments/<name>/`` folder (installed as ``gymflow.environments``): each
  sub-package exposes one subclass whose ``name`` is the folder's name;
* any installed distribution that declares an entry point in the group ``gymflow.environments``
  (``my_env = "my_package:MyEnvironment"``, or a module that exposes one subclass), so
  ``pip install my-env-package`` makes ``gymflow env list`` show it.

A name found in both places is an error (two environments must not answer to one name).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from importlib.metadata import entry_points

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.environment import Environment

ENTRY_POINT_GROUP = "gymflow.environments"
IN_REPO_PACKAGE = "gymflow.environments"


def list_envs() -> list[str]:
    """Every environment name, in-repo and installed, sorted."""
    return sorted(_sources())


def env_source(name: str) -> str:
    """Where ``name`` comes from: the in-repo module or the entry point's ``module:attr``."""
    return _lookup(name)


def get_env(name: str) -> Environment:
    """Instantiate the environment called ``name``; ``bad_request`` naming the known ones."""
    target = _lookup(name)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"environment {name!r} ({target}) cannot be imported: {exc}; reinstall its package",
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


def _lookup(name: str) -> str:
    sources = _sources()
    if name not in sources:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"unknown environment {name!r}; known: {', '.join(sorted(sources))}",
        )
    return sources[name]


@cache
def _sources() -> dict[str, str]:
    package = importlib.import_module(IN_REPO_PACKAGE)
    found = {
        m.name: f"{IN_REPO_PACKAGE}.{m.name}"
        for m in pkgutil.iter_modules(package.__path__)
        if m.ispkg
    }
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found and found[ep.name] != ep.value:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"two environments are named {ep.name!r}: {found[ep.name]} and {ep.value} "
                f"(entry point of {ep.dist.name if ep.dist else 'an installed package'})",
            )
        found[ep.name] = ep.value
    return found


def _subclass_in(module, name: str) -> type | None:
    for obj in vars(module).values():
        if isinstance(obj, type) and issubclass(obj, Environment) and obj.name == name:
            return obj
    return None
