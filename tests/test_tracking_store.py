"""Where tracking and the registry are (``gymflow.core.tracking_store``), without a server:
the home's store by default, the user's ``MLFLOW_TRACKING_URI`` (or a run config's
``tracking.uri``) when set, and one ``bad_config`` line for a URI gymflow must refuse."""

from __future__ import annotations

import pytest

from gymflow.core.failures import GymflowError
from gymflow.core.tracking_server import check_versions
from gymflow.core.tracking_store import (
    HOME_STORE_VAR,
    home_store_uri,
    tracking_store,
    without_login,
)
from gymflow.lifecycle.config import LifecycleConfig


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", HOME_STORE_VAR):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_home_store_is_the_default(clean_env, tmp_path):
    store = tracking_store(tmp_path)
    assert store.home_store and not store.server
    assert store.tracking_uri == store.registry_uri == home_store_uri(tmp_path)


def test_the_users_tracking_uri_wins_over_the_home_store(clean_env, tmp_path):
    clean_env.setenv("MLFLOW_TRACKING_URI", "http://mlflow.team:5000")
    store = tracking_store(tmp_path)
    assert store.server and not store.home_store
    assert store.registry_uri == "http://mlflow.team:5000"
    clean_env.setenv("MLFLOW_REGISTRY_URI", "postgresql://registry.team/mlflow")
    assert tracking_store(tmp_path).registry_uri == "postgresql://registry.team/mlflow"


def test_a_run_configs_uri_wins_over_the_environment(clean_env, tmp_path):
    clean_env.setenv("MLFLOW_TRACKING_URI", "http://mlflow.team:5000")
    store = tracking_store(tmp_path, "http://other.team:5000")
    assert store.tracking_uri == "http://other.team:5000"


def test_another_homes_exported_store_is_not_taken_for_the_users(clean_env, tmp_path):
    """A child process inherits the home store gymflow exported for its parent's home: for a
    child of another home, that is not the user's choice."""
    parent = home_store_uri(tmp_path / "parent")
    clean_env.setenv("MLFLOW_TRACKING_URI", parent)
    clean_env.setenv(HOME_STORE_VAR, parent)
    child = tracking_store(tmp_path / "child")
    assert child.home_store and child.tracking_uri == home_store_uri(tmp_path / "child")


def test_configure_keeps_a_user_database_and_leaves_the_home_alone(clean_env, tmp_path):
    from gymflow.lifecycle.tracking import configure

    other = tmp_path / "team.db"
    clean_env.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other}")
    home = tmp_path / "home"
    home.mkdir()
    try:
        assert configure(home) == f"sqlite:///{other}"
        assert other.is_file() and not (home / "mlruns" / "mlflow.db").exists()
    finally:
        clean_env.delenv("MLFLOW_TRACKING_URI")
        configure(home)  # back to a home store for the next test of this process


def test_refused_uris_are_one_bad_config_line(clean_env, tmp_path):
    with pytest.raises(GymflowError, match=r"\[bad_config\] the tracking URI 'http://mlflow.team:5000' holds a password"):  # fmt: skip
        tracking_store(tmp_path, "http://alice:secret@mlflow.team:5000")
    clean_env.setenv("MLFLOW_REGISTRY_URI", "s3://bucket/registry")
    with pytest.raises(GymflowError, match=r"\[bad_config\] registry URI 's3://bucket/registry' has the unsupported scheme 's3'"):  # fmt: skip
        tracking_store(tmp_path)


def test_the_config_field_refuses_a_password_and_stays_out_of_the_digest():
    from pydantic import ValidationError

    plain = LifecycleConfig.smoke()
    tracked = plain.overridden({"tracking": {"uri": "http://mlflow.team:5000"}})
    assert tracked.digest() == plain.digest()  # where a run is tracked is not what it computes
    with pytest.raises(ValidationError, match="holds a password"):
        plain.overridden({"tracking": {"uri": "http://alice:secret@mlflow.team:5000"}})


def test_logins_never_show_and_versions_must_match():
    assert without_login("http://alice:secret@h:5000/x") == "http://h:5000/x"
    assert without_login("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"
    check_versions("MLflow", "3.17.2", "3.17.0", "http://h:5000")
    with pytest.raises(GymflowError, match=r"\[version_mismatch\] the MLflow server at http://h:5000 runs 2.22.1"):  # fmt: skip
        check_versions("MLflow", "2.22.1", "3.17.2", "http://h:5000")


def test_a_registry_spec_is_a_start_a_run_config_takes(tmp_path):
    from gymflow.lifecycle.run_config import run_config

    spec = "models:/gymflow-tool_call@champion"
    assert run_config(smoke=True, sets={"model_path": spec}).model_path == spec
    with pytest.raises(GymflowError, match=r"\[bad_request\] 'models:gymflow' is not a registry spec"):  # fmt: skip
        run_config(smoke=True, sets={"model_path": "models:gymflow"})
