"""GRPO with its rollouts on Ray workers (``grpo.rollout: {"engine": "ray"}``), on a local Ray cluster (2 CPUs)
this module starts and stops.

Real TRL ``GRPOTrainer`` on the embedded tiny model, counter with graded partial credit (a
random policy's rewards vary, so every step moves the weights). A callback reads the trainer's
weights when each step begins (what that step's rollouts must be sampled with) and asks every
worker for the digest of the weights it holds when the step ends: equal, at every step. The
stored rollouts have the local engine's schema, lineage and part files.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest
from transformers import TrainerCallback

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
from gymflow.rollout.store import Lineage, read_parts
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo

ray = pytest.importorskip("ray")
import graded_counter  # noqa: E402 (tests/ is on the path)
from graded_counter import GradedCounter  # noqa: E402

from gymflow.core.ray_cluster import ray_cluster  # noqa: E402
from gymflow.rollout.ray_worker import weights_digest  # noqa: E402

LINEAGE = ["run_id", "iteration", "policy_version", "policy", "env", "env_version", "dataset_hash"]


@pytest.fixture(scope="module")
def cluster():
    # GradedCounter lives in a test helper module: it goes to the workers by value
    ray.cloudpickle.register_pickle_by_value(graded_counter)
    started = time.perf_counter()
    with ray_cluster(None, num_cpus=2, object_store_mb=100) as c:
        print(f"\nlocal Ray cluster up in {time.perf_counter() - started:.1f} s")
        yield c
    ray.cloudpickle.unregister_pickle_by_value(graded_counter)


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = GradedCounter()
    cfg = TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=192, corpus_size=800)
    base = ensure_tiny_model(
        tmp_path_factory.mktemp("cache"), "counter", lambda: tokenizer_corpus(env, 800, 5), cfg
    )
    pool = build_tasks(env, 64, seed=3, heldout_frac=0.0, val_frac=0.0)
    yield env, pool, base
    torch.set_num_threads(threads)


def _settings(**kw) -> GRPOSettings:
    base = dict(
        max_steps=3, prompts_per_step=2, num_generations=4, max_new_tokens=12,
        learning_rate=1e-2, temperature=1.0, save_every=1000, time_budget_s=None,
        dynamic_sampling=False, validate_every=None, demo_loss=None, task_sampling="uniform",
    )  # fmt: skip
    return GRPOSettings(**{**base, **kw})


def _train(setting, out: Path, settings: GRPOSettings, callbacks=None):
    """``run_grpo`` from the tiny model; ``callbacks(source)`` gives its extra callbacks."""
    env, pool, base = setting
    lineage = Lineage("ray-grpo", 0, 0, "grpo", env.name, env.version, "tasks-hash")
    source = RolloutSource(env, build_app(env), pool, settings, out, lineage)
    extra = callbacks(source) if callbacks else []
    return run_grpo(base, out, source, settings, log_to_mlflow=False, callbacks=extra), source


class WeightsSeen(TrainerCallback):
    """The trainer's weights digest as each step begins (what its rollouts must be sampled
    with), each Ray worker's as it ends (after the optimizer step they still hold those)."""

    def __init__(self, source: RolloutSource) -> None:
        self.source = source
        self.trainer: list[str] = []
        self.workers: list[list[str]] = []

    def on_step_begin(self, args, state, control, model=None, **kw):
        self.trainer.append(weights_digest(model.state_dict()))

    def on_step_end(self, args, state, control, **kw):
        actors = self.source.backend.workers.workers.actors
        self.workers.append(ray.get([a.digest.remote() for a in actors]))


def test_grpo_trains_3_steps_on_ray_workers_that_hold_the_trainers_weights(
    cluster, setting, tmp_path
):
    callbacks: list[WeightsSeen] = []
    settings = _settings(rollout={"engine": "ray", "workers": 2})
    result, source = _train(
        setting, tmp_path, settings, lambda src: callbacks.append(WeightsSeen(src)) or callbacks
    )
    seen = callbacks[0]
    assert result["steps"] == 3
    assert len(seen.trainer) == len(seen.workers) == 3
    assert len(set(seen.trainer)) == 3, "every step moved the weights"
    for trainer, workers in zip(seen.trainer, seen.workers, strict=True):
        assert workers == [trainer, trainer]  # both workers sampled with the trainer's weights
    # the source's own record of each sync (one per step, before its rollouts) says the same
    assert [s["step"] for s in source.backend.workers.syncs] == [0, 1, 2]
    assert [s["trainer"] for s in source.backend.workers.syncs] == seen.trainer
    assert (
        source.backend.workers.workers is None
    )  # run_grpo stopped the workers when training ended

    rows = read_parts(tmp_path / "rollouts")
    assert rows.height == 3 * 2 * 4
    assert rows["iteration"].to_list() == rows["policy_version"].to_list()
    assert sorted(set(rows["iteration"].to_list())) == [0, 1, 2]
    assert rows["reward"].null_count() == 0 and rows["reward"].n_unique() > 1
    assert all(sum(mask) > 0 for mask in rows["env_mask"].to_list())  # the token view trains


def test_ray_rollouts_are_stored_as_the_local_engines(cluster, setting, tmp_path):
    """One step each way from the same start: the same files, schema, lineage, ids and seeds."""
    _train(setting, tmp_path / "local", _settings(max_steps=1))
    _, source = _train(setting, tmp_path / "ray", _settings(max_steps=1, rollout={"engine": "ray"}))
    assert len(source.backend.workers.syncs) == 1
    local, on_ray = (read_parts(tmp_path / p / "rollouts") for p in ("local", "ray"))
    assert on_ray.schema == local.schema
    ids = ["rollout_id", "task_id", "group_id", "sample_idx", "seed", "used_for_training"]
    assert (
        on_ray.select(*LINEAGE, *ids)
        .sort("rollout_id")
        .equals(local.select(*LINEAGE, *ids).sort("rollout_id"))
    )
    names = [
        sorted(p.name for p in (tmp_path / d / "rollouts").glob("*.parquet"))
        for d in ("local", "ray")
    ]
    assert names[0] == names[1] and len(names[0]) == 1  # one part for the step, same name
    tasks = [pl.read_parquet(tmp_path / d / "tasks.parquet") for d in ("local", "ray")]
    assert tasks[0].equals(tasks[1])


def test_grpo_settings_refuse_what_ray_workers_cannot_roll_out():
    from pydantic import ValidationError

    from gymflow.train.grpo import LoraSettings

    with pytest.raises(ValidationError, match='rollout engine "ray" rolls out full weights'):
        GRPOSettings(rollout={"engine": "ray"}, lora=LoraSettings())
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        GRPOSettings(rollout={"engine": "local", "address": "127.0.0.1:6379"})


def test_ray_rollouts_refuse_a_mix_of_environments(setting):
    """A worker holds one environment's client: another environment's task is refused."""
    import asyncio

    from gymflow.core.failures import GymflowError
    from gymflow.rollout.episode import Sampling
    from gymflow.rollout.store import plan
    from gymflow.train.ray_rollouts import RayRollouts

    env, pool, _ = setting
    planned = plan([pool[0].model_copy(update={"env": "math"})], "run", 0, 2, 0)
    with pytest.raises(GymflowError, match=r"runs one environment \(counter\), not \['math'\]"):
        asyncio.run(RayRollouts(env, Sampling(), 2).run(planned, lambda *done: None))
