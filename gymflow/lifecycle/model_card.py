"""The model card a registered policy carries: its description and its start's license.

MLflow's transformers flavor looks a model card and a license up on the Hugging Face Hub by the
model's ``name_or_path`` unless it is handed a card. A policy trained here is named by a local
folder, so the look-up fails and logs two warnings at every registration (under the run's
results table), and a name shaped like a Hub id would be looked up over the network. gymflow
hands MLflow a card built here instead (``mlflow.transformers.log_model(model_card=...)``); its
license is the start's, followed down the chain of runs:

- the embedded tiny model: gymflow's own license (built and trained here from a random init);
- ``catalog:NAME``: the license the catalog records for that model;
- a checkpoint folder: the ``license`` of its own model card (``README.md``, the Hub's
  convention), else ``other``;
- the champion: the license its version was registered with (the ``gymflow.license`` tag).
"""

from __future__ import annotations

from pathlib import Path

LICENSE_TAG = "gymflow.license"
EMBEDDED_LICENSE = "apache-2.0"
"""gymflow's license (``pyproject.toml``): the embedded model is built and trained here."""
UNKNOWN_LICENSE = "other"


def start_license(model_path: str | None, source: str, tags: dict[str, str] | None) -> str:
    """The license of a run's start: ``model_path`` is the run's ``model_path`` setting,
    ``source`` its ``resolve_policy`` source, ``tags`` the champion version's tags when the run
    started from the champion.

    >>> start_license(None, "embedded tiny model (random init)", None)
    'apache-2.0'
    >>> start_license(None, "champion v3", {"gymflow.license": "apache-2.0"})
    'apache-2.0'
    >>> start_license(None, "champion v1", {})
    'other'
    >>> start_license("catalog:smollm2-135m-instruct", "path catalog:smollm2-135m-instruct", None)
    'apache-2.0'
    """
    from gymflow.policy.checkpoints import CATALOG_PREFIX, REGISTRY_PREFIX
    from gymflow.policy.model_catalog import CATALOG

    if model_path and not model_path.startswith(REGISTRY_PREFIX):
        if model_path.startswith(CATALOG_PREFIX):
            entry = CATALOG.get(model_path.removeprefix(CATALOG_PREFIX))
            return entry.license.lower() if entry else UNKNOWN_LICENSE
        return folder_license(Path(model_path))
    if source.startswith("champion") or model_path:  # a registered version: its own tag
        return (tags or {}).get(LICENSE_TAG, UNKNOWN_LICENSE)
    return EMBEDDED_LICENSE


def folder_license(folder: Path) -> str:
    """The ``license`` in the front matter of ``folder/README.md``, else ``other``."""
    from huggingface_hub import ModelCard

    readme = folder / "README.md"
    if not readme.is_file():
        return UNKNOWN_LICENSE
    try:
        found = ModelCard.load(readme).data.license
    except Exception:  # a README that is not a model card: no license declared
        return UNKNOWN_LICENSE
    return str(found) if found else UNKNOWN_LICENSE


def model_card(license_id: str, description: str | None):
    """A Hub-style ``ModelCard`` (front matter and text) built here, for MLflow to store."""
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(
        license=license_id,
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=["gymflow"],
    )
    text = description or "A policy trained and registered by gymflow."
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text}\n")
