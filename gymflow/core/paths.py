"""The project home: ``GYMFLOW_HOME`` if set, else the current directory.

Every layer finds it here (the lifecycle keeps ``mlruns/``, ``.prefect/``, ``runs/`` in it; the
policy layer caches converted checkpoints under its ``.cache/``).
"""

from __future__ import annotations

import os
from pathlib import Path


def project_home() -> Path:
    return Path(os.environ.get("GYMFLOW_HOME", os.getcwd())).resolve()


def cache_dir() -> Path:
    """``<home>/.cache``: built models, converted checkpoints, fetched files."""
    return project_home() / ".cache"
