"""Where MLflow's tracking and model registry are: a team's server, or the home's own store.

A run, ``gymflow models``, ``gymflow eval`` and ``models:/NAME@ALIAS`` resolution all ask
:func:`tracking_store` and so agree. The first of these that is set wins:

1. a run config's ``tracking.uri`` (:class:`gymflow.lifecycle.config.TrackingSettings`);
2. the user's ``MLFLOW_TRACKING_URI`` (e.g. ``http://mlflow.team:5000``, a ``postgresql://``
   database, another ``sqlite:///`` file);
3. the home's store, ``sqlite:///<home>/mlruns/mlflow.db`` with artifacts under
   ``<home>/mlruns/artifacts`` (the default when nothing is set).

The registry follows the tracking URI unless ``tracking.registry_uri`` or
``MLFLOW_REGISTRY_URI`` names another. gymflow exports the URI it chose as
``MLFLOW_TRACKING_URI`` (so TRL's MLflow callback and child processes agree); when that URI is
the home's store it is also kept in ``GYMFLOW_HOME_TRACKING_URI``, so a child process of
another home does not mistake it for the user's choice.

A login for a server is MLflow's own: ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` (or ``MLFLOW_TRACKING_TOKEN``), read by MLflow's REST client.
A password written into a URI (``http://user:secret@host``) is refused, since URIs are
shown and logged; :meth:`TrackingStore.shown` is the form fit for a log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gymflow.core.failures import FailureKind, GymflowError

HOME_STORE_VAR = "GYMFLOW_HOME_TRACKING_URI"
SERVER_SCHEMES = ("http", "https")
REGISTRY_SCHEMES = (
    "http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "databricks-uc",
)  # fmt: skip
"""Registry stores MLflow's client opens (a database, or a server speaking its REST API)."""


@dataclass(frozen=True)
class TrackingStore:
    """Where tracking and the registry are, and whether they are the home's own store."""

    tracking_uri: str
    registry_uri: str
    home_store: bool

    @property
    def server(self) -> bool:
        """A tracking server (REST): artifacts go through it (``mlflow-artifacts:``)."""
        return urlsplit(self.tracking_uri).scheme in SERVER_SCHEMES

    def shown(self) -> str:
        """The tracking URI as it may appear in a log or a message (no login in it)."""
        return without_login(self.tracking_uri)


def home_store_uri(home: Path) -> str:
    return f"sqlite:///{(home / 'mlruns' / 'mlflow.db').resolve()}"


def user_tracking_uri() -> str | None:
    """``MLFLOW_TRACKING_URI`` when the user set it (not the home store gymflow exported)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if not uri or uri == os.environ.get(HOME_STORE_VAR):
        return None
    return uri


def tracking_store(
    home: Path, uri: str | None = None, registry_uri: str | None = None
) -> TrackingStore:
    """The store for ``home``: ``uri``/``registry_uri`` (a run config's), else the user's
    environment, else the home's sqlite store. One ``bad_config`` line for a URI that holds a
    password or a registry of a scheme MLflow cannot open."""
    tracking = uri or user_tracking_uri() or home_store_uri(home)
    registry = registry_uri or os.environ.get("MLFLOW_REGISTRY_URI", "").strip() or tracking
    for what, value in (("tracking", tracking), ("registry", registry)):
        check_no_password(value, what)
    scheme = urlsplit(registry).scheme
    if scheme not in REGISTRY_SCHEMES:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"registry URI {without_login(registry)!r} has the unsupported scheme "
            f"{scheme or '(none)'!r}; give an MLflow server (http://HOST:PORT) or a database "
            f"({', '.join(s + ':' for s in REGISTRY_SCHEMES[2:6])}) in MLFLOW_REGISTRY_URI or "
            "tracking.registry_uri",
        )
    return TrackingStore(tracking, registry, home_store=tracking == home_store_uri(home))


def check_no_password(uri: str, what: str = "tracking") -> None:
    """Refuse ``http://user:secret@host``: the secret belongs in MLflow's login variables."""
    parts = urlsplit(uri)
    if parts.scheme in SERVER_SCHEMES and parts.password:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"the {what} URI {without_login(uri)!r} holds a password; remove it from the URI "
            "and set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD instead",
        )


def without_login(uri: str) -> str:
    """``http://user:secret@host:5000/x`` -> ``http://host:5000/x``; a database URI's login
    goes too (``postgresql://u:p@host/db`` -> ``postgresql://host/db``).

    >>> without_login("postgresql://gymflow:secret@127.0.0.1:5432/mlflow")
    'postgresql://127.0.0.1:5432/mlflow'
    """
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class TrackingSettings(BaseModel):
    """Where a run tracks and registers, when not where the environment says."""

    model_config = ConfigDict(extra="forbid")

    uri: str | None = Field(
        None,
        description="MLflow tracking URI of the run: a team's server (http://HOST:PORT, "
        "artifacts through its --serve-artifacts store) or a database. None: the user's "
        "MLFLOW_TRACKING_URI, else the home's store (mlruns/). Never a password: "
        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD hold the login. Not part of "
        "the config digest.",
    )
    registry_uri: str | None = Field(
        None,
        description="MLflow registry URI when it is not the tracking URI's (None: "
        "MLFLOW_REGISTRY_URI, else the tracking URI).",
    )

    @field_validator("uri", "registry_uri")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value and urlsplit(value).password:
            raise ValueError(
                "holds a password; remove it from the URI and set MLFLOW_TRACKING_USERNAME "
                "and MLFLOW_TRACKING_PASSWORD instead"
            )
        return value
