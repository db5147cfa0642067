"""Coverage report and dataset lineage of ``generate_tasks`` (real Prefect engine, real MLflow)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gymflow.core.task_record import Task
from gymflow.data.coverage import FACETS, coverage_gaps, coverage_rows, task_facets
from gymflow.data.settings import TaskDataSettings
from gymflow.data.task_set import build_tasks
from gymflow.data.task_table import dataset_hash, read_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext


def test_facets_read_every_environment_the_same_way():
    tool_call, games, math = (get_env(n) for n in ("tool_call", "games", "math"))
    call = build_tasks(tool_call, 20, 1, 0.0, 0.0)[0]
    assert task_facets(tool_call, call)["tool"] == call.ground_truth["tool"]
    game = build_tasks(games, 20, 1, 0.0, 0.0)[0]
    assert task_facets(games, game)["template"] == game.ground_truth["game"]
    sum_task = build_tasks(math, 20, 1, 0.0, 0.0)[0]
    facets = task_facets(math, sum_task)
    assert facets["difficulty"] == str(sum_task.ground_truth["level"])
    assert facets["tool"] == "none" and facets["source"] == "generated"


def test_rows_count_every_task_once_per_facet_and_gaps_name_the_holes():
    env = get_env("tool_call")
    tasks = build_tasks(env, 600, 1, 0.1, 0.05)
    rows = coverage_rows(env, tasks)
    for facet in FACETS:
        assert sum(r["total"] for r in rows if r["facet"] == facet) == len(tasks)
    no_timer = [
        t for t in tasks if not (t.split == "train" and t.ground_truth["tool"] == "set_timer")
    ]
    gaps = coverage_gaps(coverage_rows(env, no_timer))
    assert any(g.startswith("tool=set_timer: ") and "none in train" in g for g in gaps)
    assert not any(g.startswith("tool=") for g in coverage_gaps(rows))


def test_generate_tasks_logs_coverage_and_dataset_versions(gym_home, prefect_engine, tmp_path):
    from mlflow import MlflowClient
    from prefect import flow

    from gymflow.lifecycle.tracking import parent_run_id
    from gymflow.tasks.generate import generate_tasks

    ctx = RunContext(
        run_id="coverage-run",
        run_dir=str(tmp_path / "coverage-run"),
        home=str(gym_home),
        mlflow_parent_id=parent_run_id("coverage-run"),
    )
    cfg = LifecycleConfig(n_tasks=300, task_data=TaskDataSettings(recorded_heldout=False))

    @flow
    def only_generate() -> object:
        return generate_tasks(ctx, cfg)

    state = only_generate(return_state=True)
    data, flow_run_id = state.result(), state.state_details.flow_run_id
    report = json.loads(Path(data.coverage).read_text())
    tasks = [t for split in ("train", "val", "heldout") for t in read_tasks(data.paths[split])]
    assert report["rows"] == coverage_rows(get_env("tool_call"), tasks)

    run = MlflowClient().get_run(data.stage.mlflow_run_id)
    logged = {a.path for a in MlflowClient().list_artifacts(run.info.run_id, "reports")}
    assert {"reports/coverage.json", "reports/coverage.png"} <= logged
    digests = {d.dataset.name: d.dataset.digest for d in run.inputs.dataset_inputs}
    for split in ("train", "val", "heldout"):
        part: list[Task] = read_tasks(data.paths[split])
        assert digests[f"tool_call-{split}"] == dataset_hash(part) == data.split_hashes[split]
        assert run.data.params[f"dataset_hash_{split}"] == dataset_hash(part)
    assert run.data.params["dataset_hash"] == data.dataset_hash
    assert data.dedup["drafts"] == 300 and data.dedup["exact_duplicates"] > 0

    async def table() -> list[dict]:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import (
            ArtifactFilter,
            ArtifactFilterFlowRunId,
            ArtifactFilterKey,
        )

        mine = ArtifactFilter(  # this flow run's: earlier tests' runs left theirs on the server
            key=ArtifactFilterKey(any_=["task-coverage"]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
        )
        async with get_client() as client:
            (found,) = await client.read_artifacts(artifact_filter=mine)
        return json.loads(found.data)

    assert asyncio.run(table()) == report["rows"]
