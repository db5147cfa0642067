"""What a lifecycle run's outcome depends on, as one fingerprint: has anything changed?

A run is decided by its task data (the dataset hash), the policy it starts from (the registry's
``champion`` version), its config (digest) and the code (commit or package version), for one
environment and version. A finished run tags its MLflow parent run with the fingerprint of
these (``gymflow.inputs``); a scheduled run computes its own before any stage and, when a
finished run had the same, ends at once and says which run already did the work.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

from gymflow.lifecycle.code_version import code_version
from gymflow.lifecycle.config import LifecycleConfig

INPUTS_TAG = "gymflow.inputs"


class RunInputs(BaseModel):
    env: str
    env_version: str
    dataset_hash: str
    champion_version: str | None
    config_digest: str
    code_version: str

    def fingerprint(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        champion = f"v{self.champion_version}" if self.champion_version else "none"
        return (
            f"data {self.dataset_hash}, champion {champion}, config {self.config_digest}, "
            f"code {self.code_version}, env {self.env} v{self.env_version}"
        )


def current_inputs(cfg: LifecycleConfig) -> RunInputs:
    """The inputs a run of ``cfg`` would have now: its task data is assembled (not written) to
    hash it, as ``generate_tasks`` would; the champion is read from the registry."""
    from gymflow.data.task_set import assemble_tasks
    from gymflow.data.task_table import dataset_hash
    from gymflow.env.registry import get_env
    from gymflow.lifecycle.model_registry import champion_version

    env = get_env(cfg.env)
    built = assemble_tasks(
        env, cfg.n_tasks, cfg.task_seed, cfg.heldout_frac, cfg.val_frac, cfg.task_data
    )
    champion = None if cfg.model_path else champion_version(cfg.model_name)
    return RunInputs(
        env=cfg.env,
        env_version=env.version,
        dataset_hash=dataset_hash(built.tasks),
        champion_version=champion,
        config_digest=cfg.digest(),
        code_version=code_version(),
    )


def finished_run_with(inputs: RunInputs) -> str | None:
    """The ``gymflow.run_id`` of a finished lifecycle run with these inputs, if any."""
    import mlflow
    from mlflow import MlflowClient

    from gymflow.lifecycle.tracking import EXPERIMENT

    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        return None
    found = MlflowClient().search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{INPUTS_TAG}` = '{inputs.fingerprint()}' "
        "and tags.`gymflow.kind` = 'lifecycle'",
        max_results=1,
    )
    return found[0].data.tags["gymflow.run_id"] if found else None
