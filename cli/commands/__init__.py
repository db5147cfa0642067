"""Command groups beside the core ones in :mod:`gymflow.cli.main`, one module per concern.

Each module here defines ``register(app)``, which adds its commands (or a sub-``Typer``) to the
``gymflow`` app; :func:`register_all` calls every one, in name order. A new group is a new file:
nothing else changes, so groups are added and reviewed on their own.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register_all(app: typer.Typer) -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{module.name}").register(app)
