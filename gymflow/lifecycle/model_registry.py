"""The MLflow model registry: register candidates, move aliases with their history, fetch policies.

Each candidate is logged with the transformers flavor (a loadable text-generation model) and
registered as a new version with a description, lineage tags and its gate evidence.
``champion`` moves only when the gate passes (or a person runs ``gymflow promote``); the version
it pointed at before keeps the ``previous_champion`` alias, and ``gymflow rollback`` moves
``champion`` back to it. Every alias move is kept as a tag of the registered model
(``alias_history.NNNN``), so the history shows in the MLflow UI and in ``gymflow models list``.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.model_card import LICENSE_TAG, UNKNOWN_LICENSE, model_card

PIP_REQUIREMENTS = ["torch==2.13.0", "transformers>=5.2,<6", "tokenizers"]
HISTORY_PREFIX = "alias_history."
ALIASES = ("champion", "previous_champion", "challenger")


def registered_name(env_name: str) -> str:
    return f"gymflow-{env_name}"


def register_candidate(
    model_dir: Path,
    name: str,
    tags: dict[str, str],
    description: str | None = None,
    license_id: str = UNKNOWN_LICENSE,
) -> str:
    """Log ``model_dir`` under the active MLflow run and register it as ``challenger``, with a
    model card built here (``gymflow.lifecycle.model_card``: its description and
    ``license_id``, also the version's ``gymflow.license`` tag); returns the version."""
    import mlflow
    from mlflow import MlflowClient
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = Path(model_dir).resolve()  # a local name, never one the Hub could answer to
    components = {
        "model": AutoModelForCausalLM.from_pretrained(model_dir),
        "tokenizer": AutoTokenizer.from_pretrained(model_dir),
    }
    info = mlflow.transformers.log_model(
        transformers_model=components,
        name="policy",
        task="text-generation",
        registered_model_name=name,
        pip_requirements=PIP_REQUIREMENTS,
        model_card=model_card(license_id, description),
    )
    version = str(info.registered_model_version)
    client = MlflowClient()
    for key, value in (tags | {LICENSE_TAG: license_id}).items():
        client.set_model_version_tag(name, version, key, str(value)[:5000])
    if description:
        client.update_model_version(name, version, description=description)
    set_alias(name, "challenger", version, "registered by the lifecycle")
    return version


def set_alias(name: str, alias: str, version: str | None, why: str) -> None:
    """Point ``alias`` at ``version`` (``None`` removes it) and record the move as a tag."""
    from mlflow import MlflowClient

    client = MlflowClient()
    before = alias_version(name, alias)
    if before == version:
        return
    if version is None:
        client.delete_registered_model_alias(name, alias)
    else:
        client.set_registered_model_alias(name, alias, version)
    number = len(alias_history(name)) + 1
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    moved = f"{alias}: {_v(before)} -> {_v(version)}"
    client.set_registered_model_tag(name, f"{HISTORY_PREFIX}{number:04d}", f"{at} {moved} ({why})")


def move_champion(name: str, version: str, why: str = "gate passed") -> str | None:
    """Point ``champion`` at ``version``; the old champion becomes ``previous_champion``."""
    previous = champion_version(name)
    if previous is not None and previous != version:
        set_alias(name, "previous_champion", previous, f"champion moved to v{version}")
    set_alias(name, "champion", version, why)
    return previous


def rollback(name: str, why: str = "rollback") -> tuple[str, str]:
    """Move ``champion`` back to ``previous_champion``; returns ``(from, to)`` versions.

    ``previous_champion`` then points at the champion before that one in the alias history
    (or is removed when there was none), so a second rollback goes one step further back.
    """
    current, previous = champion_version(name), alias_version(name, "previous_champion")
    if previous is None:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{name}: no previous_champion to roll back to (champion is {_v(current)}); "
            "use `gymflow promote VERSION` to pick a version",
        )
    earlier = _champion_before(name, previous, current)
    set_alias(name, "champion", previous, why)
    set_alias(name, "previous_champion", earlier, f"{why}: v{current} demoted")
    return current or "none", previous


def promote_version(name: str, version: str, why: str) -> str | None:
    """A person's promotion: ``champion`` to ``version`` (which must exist)."""
    get_version(name, version)
    return move_champion(name, version, why)


def get_version(name: str, version: str):
    """The registered version, or ``not_found`` naming the versions there are."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient()
    try:
        return client.get_model_version(name, version)
    except MlflowException:
        known = ", ".join(str(v.version) for v in list_versions(name)) or "none"
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"{name}: no version {version!r} (versions: {known})"
        ) from None


def list_versions(name: str) -> list:
    """Every version of ``name``, newest first (``[]`` when the model is not registered)."""
    from mlflow import MlflowClient

    versions = MlflowClient().search_model_versions(f"name = '{name}'")
    return sorted(versions, key=lambda v: int(v.version), reverse=True)


def aliases_by_version(name: str) -> dict[str, list[str]]:
    """``{version: [alias, ...]}`` (``search_model_versions`` leaves aliases out)."""
    from mlflow import MlflowClient

    out: dict[str, list[str]] = {}
    for alias, version in MlflowClient().get_registered_model(name).aliases.items():
        out.setdefault(str(version), []).append(alias)
    return out


def alias_history(name: str) -> list[str]:
    """Every recorded alias move, oldest first."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        tags = MlflowClient().get_registered_model(name).tags
    except MlflowException:
        return []
    return [tags[k] for k in sorted(tags) if k.startswith(HISTORY_PREFIX)]


def alias_version(name: str, alias: str) -> str | None:
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        return str(MlflowClient().get_model_version_by_alias(name, alias).version)
    except MlflowException:
        return None


def champion_version(name: str) -> str | None:
    return alias_version(name, "champion")


def download_version(name: str, version: str, dest: Path) -> Path:
    """Materialize a registered version as a plain ``from_pretrained`` folder at ``dest`` (the
    policy layer's download: weights and tokenizer, complete or absent)."""
    from mlflow import MlflowClient

    from gymflow.policy.registered import download_policy

    if not (dest / "config.json").exists():
        source = MlflowClient().get_model_version_download_uri(name, version)
        download_policy(source, name, version, dest)
    return dest


def _champion_before(name: str, version: str, current: str | None) -> str | None:
    """The champion ``version`` replaced, read from the history (``None`` if there was none)."""
    for entry in reversed(alias_history(name)):
        moved = entry.split(" ", 1)[1]
        if moved.startswith("champion: ") and moved.split(" (", 1)[0].endswith(f"-> v{version}"):
            before = moved.split(": ", 1)[1].split(" ->", 1)[0]
            if before not in ("none", f"v{current}"):
                return before.removeprefix("v")
    return None


def _v(version: str | None) -> str:
    return "none" if version is None else f"v{version}"
