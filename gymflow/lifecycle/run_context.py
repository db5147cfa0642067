"""Where a lifecycle run keeps its things, and the clock and MLflow run of each stage."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from gymflow.lifecycle.fault_injection import maybe_fail
from gymflow.lifecycle.stage_results import StageInfo


class RunContext(BaseModel):
    """Identity of one lifecycle run; part of every stage's cache key."""

    run_id: str
    run_dir: str
    home: str
    mlflow_parent_id: str

    @property
    def dir(self) -> Path:
        return Path(self.run_dir)

    @property
    def cache_dir(self) -> Path:
        return Path(self.home) / ".cache"


def open_run(home: Path, run_dir: Path, config) -> RunContext:
    """Save the run's config in its folder, find or create its MLflow parent run and put the
    config on it (artifact + flattened params).

    The run id is the folder's name, so ``gymflow run --run-id X`` finds the same run again.
    """
    from gymflow.lifecycle.tracking import configure, log_config, parent_run_id

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2))
    configure(home, config.tracking.uri, config.tracking.registry_uri)
    params = {"config_digest": config.digest(), "env": config.env}
    parent = parent_run_id(run_dir.name, params)
    log_config(parent, run_dir / "config.json", config.model_dump())
    return RunContext(
        run_id=run_dir.name, run_dir=str(run_dir), home=str(home), mlflow_parent_id=parent
    )


@contextlib.contextmanager
def stage(run: RunContext, name: str) -> Iterator[StageInfo]:
    """Open the stage's nested MLflow run and time it; ``info.wall_s`` is set on exit, and the
    stage's key figures are published to Prefect (:mod:`gymflow.lifecycle.stage_report`).

    ``GYMFLOW_FAIL_AT=<stage>`` makes that stage fail once on entry
    (:mod:`gymflow.lifecycle.fault_injection`).
    """
    from gymflow.lifecycle.stage_report import publish_stage
    from gymflow.lifecycle.tracking import stage_run

    maybe_fail(run.dir, name)
    started = time.time()
    with stage_run(run.mlflow_parent_id, name, run.run_id) as mlrun:
        info = StageInfo(mlflow_run_id=mlrun.info.run_id)
        yield info
        info.wall_s = round(time.time() - started, 2)
        import mlflow

        mlflow.log_metric("stage_wall_s", info.wall_s)
        publish_stage(run.home, name, run.run_id, info.mlflow_run_id, info.wall_s)
