"""A registered policy carries a model card built here, with its start's license.

Real parts: a real MLflow sqlite registry in a temporary home (``gym_home``), the transformers
flavor's ``log_model`` as the lifecycle's promote stage calls it, the embedded tool_call Llama.
Before, MLflow looked the card and license up on the Hugging Face Hub by the model's local
folder name and logged two warnings at every registration.
"""

from __future__ import annotations

import doctest
import logging

import yaml
from log_records import LogRecords  # tests/ is on the path

from gymflow.lifecycle import model_card
from gymflow.lifecycle.model_card import LICENSE_TAG, folder_license


def test_the_start_license_follows_its_source():
    assert doctest.testmod(model_card).failed == 0


def test_a_checkpoint_folder_declares_its_license_in_its_card(tmp_path):
    assert folder_license(tmp_path) == "other"  # no README.md
    (tmp_path / "README.md").write_text("# just notes\n")
    assert folder_license(tmp_path) == "other"  # a README without front matter
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n\n# my model\n")
    assert folder_license(tmp_path) == "mit"


def test_a_registered_version_has_the_card_and_no_hub_lookup(gym_home, micro_tool_call_model):
    import mlflow

    from gymflow.lifecycle.model_registry import register_candidate

    records = LogRecords()
    flavor = logging.getLogger("mlflow.transformers")
    flavor.addHandler(records)
    try:
        with mlflow.start_run(run_name="register-with-card"):
            version = register_candidate(
                micro_tool_call_model, "gymflow-cardtest", {"origin": "test"},
                "Trained by a test.", license_id="apache-2.0",
            )  # fmt: skip
    finally:
        flavor.removeHandler(records)
    hub = [m for m in records.messages if "hub" in m.lower() or "license" in m.lower()]
    assert not hub, hub
    client = mlflow.MlflowClient()
    assert client.get_model_version("gymflow-cardtest", version).tags[LICENSE_TAG] == "apache-2.0"
    folder = mlflow.artifacts.download_artifacts(f"models:/gymflow-cardtest/{version}")
    from pathlib import Path

    data = yaml.safe_load((Path(folder) / "model_card_data.yaml").read_text())
    assert data["license"] == "apache-2.0" and "gymflow" in data["tags"]
    assert "Trained by a test." in (Path(folder) / "model_card.md").read_text()
