"""The project home: where ``mlruns/``, the Prefect home, caches and runs live.

``GYMFLOW_HOME`` if set, else the current directory. Prefect settings are exported as absolute
paths before Prefect is imported, so every process (CLI, server, UI) shares one database.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_home() -> Path:
    return Path(os.environ.get("GYMFLOW_HOME", os.getcwd())).resolve()


def configure_prefect(home: Path) -> None:
    prefect_home = home / ".prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    defaults = {
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(prefect_home / "storage"),
        "PREFECT_LOGGING_LEVEL": "INFO",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
        "DISABLE_MLFLOW_INTEGRATION": "FALSE",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
