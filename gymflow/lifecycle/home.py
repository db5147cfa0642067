"""The project home: where ``mlruns/``, the Prefect home, caches and runs live.

``GYMFLOW_HOME`` if set, else the current directory. Prefect settings are exported as absolute
paths before Prefect is imported, so every process (CLI, server, UI) shares one database.
While ``gymflow ui`` serves the project, runs use its Prefect API rather than starting a
temporary server of their own (seconds saved per run, and the run shows live in the UI).
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
    use_project_server(home)
    quiet_libraries()


def use_project_server(home: Path) -> None:
    """Point ``PREFECT_API_URL`` at the project's ``gymflow ui`` server when one answers
    (and no API URL was set by the user)."""
    if "PREFECT_API_URL" in os.environ or not (home / ".ui.json").exists():
        return
    import urllib.request

    from gymflow.lifecycle.ui_links import ui_addresses

    api = f"{ui_addresses(home)['prefect']}/api"
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=0.5) as response:
            if response.status == 200:
                os.environ["PREFECT_API_URL"] = api
    except OSError:
        pass  # not serving (the file is from an earlier `gymflow ui`): a temporary server


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
