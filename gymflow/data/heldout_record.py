"""Held-out sets recorded in MLflow, so a later run of the same environment keeps clear of them.

``generate_tasks`` logs its held-out prompts (``data/heldout_prompts.jsonl``: task id, prompt
key, normalized text) as an artifact of its stage run and tags that run
``gymflow.heldout_env=<env>``. :func:`recorded_heldout` reads every such record of an
environment back, except the current run's own, as :class:`~gymflow.data.leakage.PromptRef`
whose origin names the run that held them out.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gymflow.core.task_record import Task
from gymflow.data.dedup import normalized_prompt, text_key
from gymflow.data.leakage import PromptRef

RECORD_PATH = "data/heldout_prompts.jsonl"
ENV_TAG = "gymflow.heldout_env"
MAX_RUNS = 500
"""Most recent recording runs read (older held-out sets are not checked against)."""


def write_record(tasks: Sequence[Task], path: Path) -> Path:
    """The held-out prompts of ``tasks`` as JSONL rows ``{task_id, prompt_key, text}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for task in tasks:
            text = normalized_prompt(task.prompt)
            row = {"task_id": task.task_id, "prompt_key": text_key(text), "text": text}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def log_record(env: str, tasks: Sequence[Task], folder: Path) -> None:
    """Record the held-out prompts in the active MLflow run (artifact + tag)."""
    import mlflow

    path = write_record(tasks, folder / Path(RECORD_PATH).name)
    mlflow.log_artifact(str(path), artifact_path=str(Path(RECORD_PATH).parent))
    mlflow.set_tag(ENV_TAG, env)


def recorded_heldout(env: str, exclude_run_id: str | None) -> list[PromptRef]:
    """Held-out prompts earlier runs recorded for ``env`` (a run whose ``gymflow.run_id`` tag
    is ``exclude_run_id`` is this run: skipped, so a resumed run does not meet itself)."""
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments,
        filter_string=f"tags.`{ENV_TAG}` = '{env}'",
        max_results=MAX_RUNS,
        order_by=["attributes.start_time DESC"],
    )
    refs: list[PromptRef] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            owner = run.data.tags.get("gymflow.run_id", run.info.run_id)
            if exclude_run_id is not None and owner == exclude_run_id:
                continue
            local = mlflow.artifacts.download_artifacts(
                run_id=run.info.run_id,
                artifact_path=RECORD_PATH,
                dst_path=str(Path(tmp) / run.info.run_id),
            )
            for line in Path(local).read_text().splitlines():
                row = json.loads(line)
                refs.append(PromptRef(row["task_id"], row["text"], f"held out by run {owner}"))
    return refs
