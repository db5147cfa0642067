"""Shared fixtures: an isolated project home, MLflow store and Prefect engine per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def gym_home(tmp_path_factory) -> Path:
    """A throwaway GYMFLOW_HOME with MLflow (sqlite) and Prefect settings pointed into it."""
    home = tmp_path_factory.mktemp("gymhome")
    os.environ["GYMFLOW_HOME"] = str(home)
    from gymflow.home import configure_prefect

    configure_prefect(home)
    from gymflow.tracking import configure

    configure(home)
    return home


@pytest.fixture(scope="session")
def prefect_engine(gym_home):
    """A real Prefect engine: temporary API server and database (prefect_test_harness)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings(
            {PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(gym_home / ".prefect" / "storage")}
        ),
    ):
        yield
