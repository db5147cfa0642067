"""The stack's one settings file: ports, folders, the work pool and its limit.

A JSON object of :class:`StackSettings` fields (every field optional), by default
``<home>/stack.json``. Secrets never go in it: MLflow's admin password is
``MLFLOW_AUTH_ADMIN_PASSWORD`` (MLflow's own variable, read when its login app starts) and
Prefect's auth string ``PREFECT_SERVER_API_AUTH_STRING`` (Prefect's own), both read from the
environment of ``gymflow stack up``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gymflow.core.failures import FailureKind, GymflowError

SETTINGS_FILE = "stack.json"


class StackSettings(BaseModel):
    """Where each part of the stack listens and keeps its data."""

    model_config = ConfigDict(extra="forbid")

    folder: str | None = Field(
        None,
        description="Where the stack keeps its databases, artifacts, results, pid files and "
        "logs (None: <home>/.stack).",
    )
    host: str = Field(
        "127.0.0.1",
        description="Address the Prefect and MLflow servers bind to (0.0.0.0 for a team's "
        "machines; PostgreSQL always listens on loopback only).",
    )
    postgres_port: int = Field(5433, ge=1, le=65535, description="PostgreSQL's port.")
    prefect_port: int = Field(4200, ge=1, le=65535, description="The Prefect server's port.")
    mlflow_port: int = Field(5000, ge=1, le=65535, description="The MLflow server's port.")
    pool: str = Field("gymflow", min_length=1, description="The process work pool's name.")
    workers: int = Field(1, ge=0, le=16, description="Workers started on this box.")
    train_limit: int = Field(
        1,
        ge=1,
        description="At most this many lifecycles run at once on the pool (the concurrency "
        "limit of its work queue 'training'), whoever started them.",
    )
    mlflow_login: bool = Field(
        False,
        description="Run MLflow's basic-auth app: every client logs in with "
        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD; the admin account's password "
        "is MLFLOW_AUTH_ADMIN_PASSWORD when the stack first starts.",
    )
    results: str | None = Field(
        None,
        description="Where Prefect keeps stage results and cache records, a folder every "
        "worker reaches (a shared mount for workers on several machines; None: "
        "<folder>/results).",
    )

    def root(self, home: Path) -> Path:
        return Path(self.folder).resolve() if self.folder else (home / ".stack").resolve()

    def results_path(self, home: Path) -> Path:
        return Path(self.results).resolve() if self.results else self.root(home) / "results"

    @property
    def prefect_api(self) -> str:
        return f"http://{_client_host(self.host)}:{self.prefect_port}/api"

    @property
    def mlflow_uri(self) -> str:
        return f"http://{_client_host(self.host)}:{self.mlflow_port}"


def _client_host(host: str) -> str:
    """The address a client on this box uses for a server bound to ``host``."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def read_settings(path: Path | None, home: Path) -> StackSettings:
    """The file at ``path`` (default ``<home>/stack.json``; absent: the defaults); one
    ``bad_config`` line for a file that is not JSON or holds an unknown or bad field."""
    path = path or home / SETTINGS_FILE
    if not path.exists():
        if path != home / SETTINGS_FILE:
            raise GymflowError(FailureKind.BAD_CONFIG, f"no stack settings file {path}")
        return StackSettings()
    try:
        return StackSettings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, OSError) as exc:
        if isinstance(exc, ValidationError):
            why = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg'].lower()}"
                for e in exc.errors()
            )
        else:
            why = str(exc)
        raise GymflowError(FailureKind.BAD_CONFIG, f"{path}: {why}") from None
