"""Prefect on Ray: the collect flow's shards as mapped task runs on prefect-ray's RayTaskRunner.

The flow starts a local Ray cluster itself (loopback only, through the product's helper) and
stops it; each shard is a Prefect task run executed in a Ray worker process; the flow writes
the rows. The rows equal a local collection's in ids and rewards (scripted gold policy), and the
Prefect API holds one completed ``run_rollout_shard`` run per shard.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gymflow.core.failures import GymflowError
from gymflow.rollout.collection import CollectOptions, run_collect
from gymflow.rollout.store import read_rollouts

ray = pytest.importorskip("ray")
pytest.importorskip("prefect_ray")

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "environments" / "counter" / "examples" / "tasks.jsonl"
COLUMNS = ["rollout_id", "task_id", "sample_idx", "seed", "reward", "failure_kind"]


def _options(out: Path, **kw) -> CollectOptions:
    base = {"env": "counter", "tasks": TASKS, "policy": "scripted:counter", "out": out}
    return CollectOptions(**(base | {"num_repeats": 4, "run_id": "flow"} | kw))


def _rows(out: Path):
    return read_rollouts(out).select(COLUMNS).sort("rollout_id")


def _shard_runs(expected: int, timeout_s: float = 90.0) -> list:
    """The ``run_rollout_shard`` task runs the API holds (they arrive through events; in a full
    suite on the AVX2 machine one of three had not arrived 30 s after the flow finished)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

    wanted = TaskRunFilter(name=TaskRunFilterName(like_="run_rollout_shard"))
    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(task_run_filter=wanted)
            done = [r for r in runs if r.state is not None and r.state.is_completed()]
            if len(done) >= expected or time.monotonic() > deadline:
                return done
            time.sleep(0.5)


def test_collect_flow_shards_run_as_task_runs_on_ray(prefect_engine, tmp_path):
    from gymflow.flows.collect import collect

    assert not ray.is_initialized()  # the flow starts its own local cluster
    report = collect(_options(tmp_path / "ray").model_dump(mode="json"), 3, "ray")
    assert not ray.is_initialized()  # ... and stops it
    engine = report["engine"]
    assert (engine["name"], engine["task_runner"], engine["shards"]) == (
        "prefect", "RayTaskRunner", 3,
    )  # fmt: skip
    assert engine["processes"] and os.getpid() not in engine["processes"]  # in Ray workers
    assert report["collected"] == 20 and not report["failures"]
    local = run_collect(_options(tmp_path / "local"))
    assert local.collected == 20
    assert _rows(tmp_path / "ray").equals(_rows(tmp_path / "local"))
    assert _rows(tmp_path / "ray")["reward"].to_list() == [1.0] * 20
    assert len(_shard_runs(3)) == 3


def test_collect_flow_shards_on_threads_resume_what_is_missing(prefect_engine, tmp_path):
    from gymflow.flows.collect import collect

    first = collect(_options(tmp_path, num_repeats=2).model_dump(mode="json"), shards=2)
    assert first["engine"]["processes"] == [os.getpid()]  # threads of this process
    assert first["collected"] == 10
    again = collect(_options(tmp_path, num_repeats=2).model_dump(mode="json"), shards=2)
    assert (again["collected"], again["already_on_disk"]) == (0, 10)
    assert again["engine"]["shards"] == 0  # nothing left to run


def test_shards_refuse_the_ray_engine_and_a_stray_address(prefect_engine, tmp_path):
    from gymflow.flows.collect import collect

    options = _options(tmp_path, engine="ray").model_dump(mode="json")
    with pytest.raises(GymflowError, match="give engine 'local' with them"):
        collect(options, shards=2)
    with pytest.raises(GymflowError, match="a Ray address is for task_runner 'ray'"):
        collect(_options(tmp_path).model_dump(mode="json"), 2, "threads", "127.0.0.1:6379")
