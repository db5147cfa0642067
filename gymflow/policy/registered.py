"""Policies from the MLflow model registry: ``models:/NAME@ALIAS`` and ``models:/NAME/VERSION``.

The registry is wherever the home's runs register (:mod:`gymflow.core.tracking_store`): a
team's MLflow server (``MLFLOW_TRACKING_URI``, or ``MLFLOW_REGISTRY_URI`` where it differs),
else the home's ``sqlite:///<home>/mlruns/mlflow.db``; the home is ``GYMFLOW_HOME``, else the
current directory, as everywhere in the project. An alias is resolved to its version on every
call (aliases move); the version's ``policy`` artifact (a transformers-flavor model logged by
the lifecycle's promote stage) is downloaded once — from the server's artifact store when
there is a server, so no shared disk is needed — into
``<home>/.cache/registry/<NAME>/v<VERSION>/`` as a plain ``from_pretrained`` folder, and read
from there afterwards (a version never changes).

A registry that is not there, a model or alias that is not in it, or a version whose artifact
is not a transformers model is a one-line ``GymflowError`` saying what to do; nothing is created
as a side effect (MLflow would otherwise create an empty database on first contact).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tracking_server import check_tracking_server
from gymflow.core.tracking_store import TrackingStore, tracking_store

CACHE_FOLDER = "registry"


@dataclass(frozen=True)
class RegisteredPolicy:
    """One registry version, resolved, with its local copy."""

    name: str
    version: str
    alias: str | None
    model_id: str | None
    """MLflow 3's logged model behind the version (evaluation metrics are linked to it)."""
    path: Path

    @property
    def pinned_spec(self) -> str:
        """The spec of this exact version (aliases move; lineage records the version)."""
        return f"models:/{self.name}/{self.version}"


def parse_registry_uri(target: str) -> tuple[str, str | None, str | None]:
    """``/NAME@ALIAS`` or ``/NAME/VERSION`` (the part after ``models:``) -> (name, alias, version).

    >>> parse_registry_uri("/gymflow-tool_call@champion")
    ('gymflow-tool_call', 'champion', None)
    >>> parse_registry_uri("/gymflow-tool_call/3")
    ('gymflow-tool_call', None, '3')
    """
    body = target[1:] if target.startswith("/") else ""
    name, at, alias = body.partition("@")
    if at and name and alias and "/" not in body:
        return name, alias, None
    name, slash, version = body.rpartition("/")
    if slash and name and version.isdigit() and "@" not in body:
        return name, None, version
    raise GymflowError(
        FailureKind.BAD_REQUEST,
        f"'models:{target}' is not a registry spec; write models:/NAME@ALIAS "
        "(e.g. models:/gymflow-tool_call@champion) or models:/NAME/VERSION",
    )


def home_dir() -> Path:
    """``GYMFLOW_HOME``, else the current directory (the project's rule for its home)."""
    return Path(os.environ.get("GYMFLOW_HOME", os.getcwd())).resolve()


def registry_store(home: Path) -> TrackingStore:
    """The home's store (its sqlite file must exist), or the server it is pointed at (which
    must answer: :func:`gymflow.core.tracking_server.check_tracking_server`)."""
    store = tracking_store(home)
    db = home / "mlruns" / "mlflow.db"
    if store.home_store and not db.is_file():
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"no MLflow registry at {db}: run `gymflow run` in this home first, point "
            "GYMFLOW_HOME at the home that holds the registered model, or set "
            "MLFLOW_TRACKING_URI to the team's MLflow server",
        )
    if store.server:
        check_tracking_server(store.tracking_uri)
    return store


def resolve(target: str, home: Path | None = None) -> RegisteredPolicy:
    """The version ``models:TARGET`` names, downloaded once into the home's cache."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    name, alias, version = parse_registry_uri(target)
    home = home or home_dir()
    store = registry_store(home)
    client = MlflowClient(tracking_uri=store.tracking_uri, registry_uri=store.registry_uri)
    try:
        found = (
            client.get_model_version_by_alias(name, alias)
            if alias
            else client.get_model_version(name, version)
        )
    except MlflowException:
        raise _not_registered(client, name, alias, version, store.shown()) from None
    version = str(found.version)
    dest = home / ".cache" / CACHE_FOLDER / name / f"v{version}"
    if not (dest / "config.json").is_file():
        source = client.get_model_version_download_uri(name, version)
        download_policy(source, name, version, dest, store.tracking_uri)
    return RegisteredPolicy(name, version, alias, _model_id(found), dest)


def _model_id(found) -> str | None:
    """The logged model of a version: its ``model_id``, else read from a ``models:/m-…`` source
    (versions registered by ``log_model(registered_model_name=…)`` leave the field empty)."""
    if getattr(found, "model_id", None):
        return found.model_id
    source = str(found.source or "")
    return source.removeprefix("models:/") if source.startswith("models:/m-") else None


def download_policy(
    source: str, name: str, version: str, dest: Path, tracking_uri: str | None = None
) -> None:
    """Copy the version's model weights and tokenizer from its artifact location ``source``
    into ``dest`` (complete or absent). The location, not a ``models:/`` URI: MLflow resolves
    those through its global registry setting, not the client's. An ``mlflow-artifacts:``
    location is read through the tracking server ``tracking_uri`` (default: MLflow's global)."""
    import mlflow

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as scratch:
        local = Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=source, dst_path=scratch, tracking_uri=tracking_uri
            )
        )
        model, tokenizer = local / "model", local / "components" / "tokenizer"
        if not (model / "config.json").is_file() or not tokenizer.is_dir():
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"models:/{name}/{version} is not a transformers policy (no model/config.json "
                "and components/tokenizer/ in its artifact); register one with `gymflow run`",
            )
        staged = Path(scratch) / "policy"
        shutil.copytree(model, staged)
        for item in tokenizer.iterdir():
            shutil.copy2(item, staged / item.name)
        staged.rename(dest)


def _not_registered(client, name: str, alias: str | None, version: str | None, uri: str):
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        versions = []
    if not versions:
        return GymflowError(
            FailureKind.BAD_REQUEST,
            f"no registered model {name!r} in {uri}; `gymflow run` registers gymflow-<env>",
        )
    known = ", ".join(sorted((str(v.version) for v in versions), key=int))
    aliases = sorted(client.get_registered_model(name).aliases or {})
    what = f"alias {alias!r}" if alias else f"version {version!r}"
    return GymflowError(
        FailureKind.BAD_REQUEST,
        f"{name} has no {what} (versions: {known}; aliases: {', '.join(aliases) or 'none'})",
    )
