"""The MLflow model registry: register candidates, move the ``champion`` alias, fetch policies.

Each candidate is logged with the transformers flavor (a loadable text-generation model) and
registered as a new version tagged with its gate result. ``champion`` moves only when the gate
passes; the version it pointed at before keeps the ``previous_champion`` alias for rollback.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PIP_REQUIREMENTS = ["torch==2.13.0", "transformers>=5.2,<6", "tokenizers"]


def registered_name(env_name: str) -> str:
    return f"gymflow-{env_name}"


def register_candidate(model_dir: Path, name: str, tags: dict[str, str]) -> str:
    """Log ``model_dir`` under the active MLflow run and register it; returns the version."""
    import mlflow
    from mlflow import MlflowClient
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
    )
    version = str(info.registered_model_version)
    client = MlflowClient()
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)
    client.set_registered_model_alias(name, "challenger", version)
    return version


def move_champion(name: str, version: str) -> str | None:
    """Point ``champion`` at ``version``; the old champion becomes ``previous_champion``."""
    from mlflow import MlflowClient

    client = MlflowClient()
    previous = champion_version(name)
    if previous is not None and previous != version:
        client.set_registered_model_alias(name, "previous_champion", previous)
    client.set_registered_model_alias(name, "champion", version)
    return previous


def champion_version(name: str) -> str | None:
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        return str(MlflowClient().get_model_version_by_alias(name, "champion").version)
    except MlflowException:
        return None


def download_version(name: str, version: str, dest: Path) -> Path:
    """Materialize a registered version as a plain ``from_pretrained`` folder at ``dest``."""
    import mlflow

    if (dest / "config.json").exists():
        return dest
    local = Path(mlflow.artifacts.download_artifacts(f"models:/{name}/{version}"))
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(local / "model", tmp)
    for item in (local / "components" / "tokenizer").iterdir():
        shutil.copy2(item, tmp / item.name)
    tmp.rename(dest)
    return dest
