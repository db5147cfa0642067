"""Find environments by name: ``environments/<name>/`` exposes one Environment subclass."""

from __future__ import annotations

import importlib
import pkgutil

from gymflow.environment import Environment


def list_envs() -> list[str]:
    import environments

    return sorted(m.name for m in pkgutil.iter_modules(environments.__path__) if m.ispkg)


def get_env(name: str) -> Environment:
    """Instantiate the environment called ``name``."""
    if name not in list_envs():
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(list_envs())}")
    module = importlib.import_module(f"environments.{name}")
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and issubclass(obj, Environment)
            and getattr(obj, "name", None) == name
        ):
            return obj()
    raise KeyError(f"environments.{name} defines no Environment subclass named {name!r}")
