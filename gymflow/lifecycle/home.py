"""The project home: where ``mlruns/``, the Prefect home, caches and runs live.

``GYMFLOW_HOME`` if set, else the current directory. Prefect settings are exported as absolute
paths before Prefect is imported, so every process (CLI, server, UI) shares one database.
"""

from __future__ import annotations

import os
from pathlib import Path

from gymflow.core.paths import project_home

__all__ = ["configure_prefect", "project_home", "quiet_libraries"]


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
    quiet_libraries()


def quiet_libraries() -> None:
    """Keep the run's console to stages and results: metrics go to MLflow, not to stdout."""
    import warnings

    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # Known, harmless notices from the pinned versions: TRL 1.16 sets the deprecated
    # gradient_checkpointing flag and passes past_key_values (renamed in transformers 5.x);
    # MLflow guesses among local dataset sources.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
    warnings.filterwarnings(
        "ignore", message=".*dataset source can be interpreted.*", category=UserWarning
    )
