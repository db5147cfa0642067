"""Collection on Ray: a real local Ray cluster (2 CPUs, started and stopped by this module).

Ray collection equals local collection row for row; a worker killed mid-shard loses and
duplicates nothing (read back from the Parquet); every worker dead fails with a kind and the
re-run resumes; the cluster this product starts listens on loopback only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import polars as pl
import psutil
import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_files import load_tasks
from gymflow.environments.counter import environment as counter
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.rollout.engine import CollectSettings, collect, plan_collection
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import read_parts, read_rollouts

ray = pytest.importorskip("ray")
from gymflow.core.ray_cluster import ray_cluster  # noqa: E402
from gymflow.rollout.ray_engine import RayWorkers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "environments" / "counter" / "examples" / "tasks.jsonl"
GYMFLOW = str(Path(sys.executable).with_name("gymflow"))  # the installed command
COLUMNS = ["rollout_id", "task_id", "group_id", "sample_idx", "seed", "reward", "success"]


class SlowCounter(CounterEnvironment):
    """``counter`` whose every tool call waits ``delay_s`` (a slow API behind the tool).

    With ``hold`` (a folder): a worker process whose pid is a file there holds every episode
    after its first ``held_after`` (its tool calls wait ``HOLD_S``), so a kill after that many
    came back lands mid-shard however late the collecting process sees them (CI on a loaded
    machine saw the whole shard back before the kill, and the kill landed in the next one)."""

    HOLD_S = 60.0

    def __init__(self, delay_s: float = 0.03, hold: Path | None = None, held_after: int = 0):
        self.delay_s, self.hold, self.held_after, self.episodes = delay_s, hold, held_after, 0

    def _wait(self, session: counter.Counter) -> float:
        if not hasattr(session, "episode"):  # the episode's first tool call
            self.episodes += 1
            session.episode = self.episodes
        held = self.hold is not None and (self.hold / str(os.getpid())).exists()
        return self.HOLD_S if held and session.episode > self.held_after else self.delay_s

    def tools(self):
        async def increment_counter(session: counter.Counter, count: int) -> dict:
            """Add to the counter.

            Args:
                count: The amount to add.
            """
            await asyncio.sleep(self._wait(session))
            return counter.increment_counter(session, count)

        async def get_counter_value(session: counter.Counter) -> dict:
            """Read the counter."""
            await asyncio.sleep(self._wait(session))
            return counter.get_counter_value(session)

        return [increment_counter, get_counter_value]


class KillAfter:
    """A runner that SIGKILLs process ``pid`` once ``after`` rollouts (of ``among``, if given)
    have come back."""

    def __init__(self, runner: RayWorkers, pid: int, after: int, among: set | None = None):
        self.runner, self.pid, self.after, self.among, self.seen = runner, pid, after, among, 0
        self.killed = False

    async def __call__(self, todo, on_done):
        def done(p, *result) -> None:
            on_done(p, *result)
            if self.killed or (self.among is not None and p.rollout_id not in self.among):
                return  # once only: a rollout from elsewhere leaves the count where it was
            self.seen += 1
            if self.seen == self.after:
                os.kill(self.pid, signal.SIGKILL)
                self.killed = True

        return await self.runner(todo, done)

    def summary(self) -> dict:
        return self.runner.summary()


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster started through the product's own helper; stopped after the module."""
    # the test module's environments go to the workers by value (it is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = time.perf_counter()
    with ray_cluster(None, num_cpus=2, object_store_mb=100) as c:
        print(f"\nlocal Ray cluster up in {time.perf_counter() - started:.1f} s")
        yield c
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _tasks(env, path: Path = TASKS):
    return list(load_tasks(env, path).values())


def _settings(**kw) -> CollectSettings:
    base = {
        "run_id": "ray-test",
        "num_repeats": 4,
        "concurrency": 2,
        "policy_spec": "scripted:counter",
        "sampling": Sampling(max_completion_tokens=1 << 16),
        "reward_range": (0.0, 1.0),
        "progress": False,
    }
    return CollectSettings(**(base | kw))


def _rows(out: Path) -> pl.DataFrame:
    return read_rollouts(out).select(COLUMNS).sort("rollout_id")


def test_the_local_cluster_listens_on_loopback_only(cluster):
    assert cluster.local and cluster.address.startswith("127.0.0.1:")
    ours = psutil.Process().children(recursive=True)
    listening = []
    for proc in ours:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        listening += [(proc.name(), c.laddr.ip) for c in conns if c.status == psutil.CONN_LISTEN]
    assert any("raylet" in name or "gcs" in name for name, _ in listening), listening
    exposed = [(n, ip) for n, ip in listening if ip not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")]
    assert not exposed, exposed


def test_ray_collection_equals_local_collection_row_for_row(cluster, tmp_path):
    env = CounterEnvironment()
    tasks, settings = _tasks(env), _settings()
    local = collect(env, _gold(tasks), tasks, tmp_path / "local", settings)
    with RayWorkers(env, tasks, settings, workers=2, shard_size=3) as runner:
        on_ray = collect(env, None, tasks, tmp_path / "ray", settings, runner=runner)
    assert on_ray.collected == local.collected == len(tasks) * 4
    assert on_ray.engine["workers"] == 2 and on_ray.engine["shards"] == 7  # 20 rollouts / 3
    ray_rows, local_rows = _rows(tmp_path / "ray"), _rows(tmp_path / "local")
    assert ray_rows.equals(local_rows)
    assert ray_rows["reward"].to_list() == [1.0] * 20
    # the same lineage in every row, and a re-run finds everything on disk
    lineage = ["run_id", "dataset_hash", "policy", "env", "env_version"]
    assert read_rollouts(tmp_path / "ray").select(lineage).unique().height == 1
    with RayWorkers(env, tasks, settings, workers=2) as runner:
        again = collect(env, None, tasks, tmp_path / "ray", settings, runner=runner)
    assert (again.collected, again.already_on_disk) == (0, 20)


def test_a_lost_part_is_collected_again_on_ray(cluster, tmp_path):
    env = CounterEnvironment()
    tasks, settings = _tasks(env), _settings()
    with RayWorkers(env, tasks, settings, workers=2) as runner:
        collect(env, None, tasks, tmp_path, settings, runner=runner)
        parts = sorted((tmp_path / "rollouts").glob("part-*.parquet"))
        lost = pl.read_parquet(parts[1]).height
        parts[1].unlink()
        report = collect(env, None, tasks, tmp_path, settings, runner=runner)
    assert (report.collected, report.already_on_disk) == (lost, 20 - lost)
    assert read_parts(tmp_path / "rollouts", every_attempt=True)["rollout_id"].n_unique() == 20


def test_a_worker_killed_mid_shard_loses_nothing_and_duplicates_nothing(cluster, tmp_path):
    hold = tmp_path / "hold"
    hold.mkdir()
    # 3 tool calls: ~0.1 s an episode, 2 live per worker; the victim holds its 4th on
    env = SlowCounter(delay_s=0.03, hold=hold, held_after=3)
    tasks, settings = _tasks(env), _settings(num_repeats=8)
    # worker 0 takes the first shard (workers take shards in order): kill it after 3 of those
    first_shard = {p.rollout_id for p in plan_collection(tasks, settings)[:10]}
    with RayWorkers(env, tasks, settings, workers=2, shard_size=10) as runner:
        victim = runner.pids()[0]
        (hold / str(victim)).touch()
        killer = KillAfter(runner, victim, after=3, among=first_shard)
        report = collect(env, None, tasks, tmp_path, settings, runner=killer)
        after = runner.pids()
    assert not psutil.pid_exists(victim) and victim not in after  # Ray started a new process
    assert report.engine["worker_restarts"] == 1
    # killed mid-shard: 3 of its 10 rollouts had come back, the rest ran again elsewhere
    assert report.engine["rollouts_run_again"] == 7
    every = read_parts(tmp_path / "rollouts", every_attempt=True)
    assert every.height == 40  # every row ever written, earlier attempts included
    assert every.group_by("task_id", "sample_idx").len()["len"].to_list() == [1] * 40
    assert every["rollout_id"].n_unique() == 40
    assert every["reward"].to_list() == [1.0] * 40 and every["attempt"].to_list() == [0] * 40


def test_every_worker_dead_fails_with_a_kind_and_the_rerun_resumes(cluster, tmp_path):
    hold = tmp_path / "hold"
    hold.mkdir()
    env = SlowCounter(delay_s=0.03, hold=hold, held_after=5)  # the kill lands after 5 came back
    tasks, settings = _tasks(env), _settings(num_repeats=8)
    with RayWorkers(env, tasks, settings, workers=1, shard_size=40, max_restarts=0) as runner:
        (hold / str(runner.pids()[0])).touch()
        killer = KillAfter(runner, runner.pids()[0], after=5)
        with pytest.raises(GymflowError) as caught:
            collect(env, None, tasks, tmp_path, settings, runner=killer)
    assert caught.value.kind == FailureKind.BACKEND_UNAVAILABLE
    assert "run the collection again to resume" in str(caught.value)
    written = read_parts(tmp_path / "rollouts").height
    assert written == 5  # what came back before the kill is on disk
    with RayWorkers(env, tasks, settings, workers=2) as runner:
        report = collect(env, None, tasks, tmp_path, settings, runner=runner)
    assert (report.already_on_disk, report.collected) == (written, 40 - written)
    assert read_parts(tmp_path / "rollouts", every_attempt=True)["rollout_id"].n_unique() == 40


def test_the_collect_flow_runs_on_ray(cluster, prefect_engine, tmp_path):
    """The Prefect flow with ``engine: ray``: on the cluster this process is connected to."""
    from gymflow.flows.collect import collect as collect_flow
    from gymflow.rollout.collection import CollectOptions

    options = CollectOptions(
        env="counter", tasks=TASKS, policy="scripted:counter", out=tmp_path, num_repeats=2,
        run_id="flow", engine="ray", ray_workers=2,
    )  # fmt: skip
    report = collect_flow(options.model_dump(mode="json"))  # as a deployment passes it
    assert report["collected"] == 10 and report["engine"]["name"] == "ray"
    assert report["engine"]["cluster_start_s"] == 0.0  # the module's cluster, not a new one
    assert read_rollouts(tmp_path)["reward"].to_list() == [1.0] * 10


def test_workers_hold_a_real_model(cluster, micro_tool_call_model, tmp_path):
    """transformers in each worker: the rows carry the token view training needs, under the
    same ids and seeds as a local collection of the same plan."""
    from gymflow.env.registry import get_env

    env = get_env("tool_call")
    tasks = _tasks(env, ROOT / "environments" / "tool_call" / "examples" / "tasks.jsonl")[:3]
    spec = f"transformers:{micro_tool_call_model}"
    settings = _settings(
        num_repeats=2, policy_spec=spec, sampling=Sampling(max_new_tokens=8),
        reward_range=env.reward_range,
    )  # fmt: skip
    local = collect(env, _policy(spec, tasks), tasks, tmp_path / "local", settings)
    with RayWorkers(env, tasks, settings, workers=2, shard_size=2) as runner:
        on_ray = collect(env, None, tasks, tmp_path / "ray", settings, runner=runner)
    assert on_ray.collected == local.collected == 6 and on_ray.unscored == 0
    rows = read_rollouts(tmp_path / "ray").sort("rollout_id")
    ids = ["rollout_id", "task_id", "sample_idx", "seed", "policy"]
    assert rows.select(ids).equals(read_rollouts(tmp_path / "local").sort("rollout_id").select(ids))
    for row in rows.iter_rows(named=True):
        assert row["prompt_ids"] and row["completion_ids"]
        assert len(row["logprobs"]) == len(row["completion_ids"]) == len(row["env_mask"])
        assert sum(row["env_mask"]) > 0


def test_trainer_weights_reach_every_worker_before_each_batch(
    cluster, micro_tool_call_model, tmp_path
):
    """Three optimizer steps of a trainer's copy of the model; after each, the weights go to
    the workers through the object store and the next batch is rolled out with them. A worker
    killed during batch 2 comes back with the model's spec weights and loads the synced ones
    before its next shard."""
    import torch
    from transformers import AutoModelForCausalLM

    from gymflow.env.registry import get_env
    from gymflow.rollout.ray_worker import weights_digest

    env = get_env("tool_call")
    tasks = _tasks(env, ROOT / "environments" / "tool_call" / "examples" / "tasks.jsonl")[:2]
    settings = _settings(
        num_repeats=2, policy_spec=f"transformers:{micro_tool_call_model}",
        sampling=Sampling(max_new_tokens=8), reward_range=env.reward_range,
    )  # fmt: skip
    trainer = AutoModelForCausalLM.from_pretrained(micro_tool_call_model)
    optimizer = torch.optim.SGD(trainer.parameters(), lr=0.5)
    ids = torch.arange(1, 9).unsqueeze(0)
    with RayWorkers(env, tasks, settings, workers=2, shard_size=2) as runner:
        held = lambda: _held(runner)  # noqa: E731
        start = weights_digest(trainer.state_dict())
        assert held() == [start, start]
        seen = {start}
        for step in (1, 2, 3):
            trainer(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            now = weights_digest(trainer.state_dict())
            assert now not in seen  # the step changed the weights
            seen.add(now)
            assert runner.sync_weights(trainer.state_dict()) == [now, now]
            batch = replace(settings, iteration=step, policy_version=step)
            kill, victim = step == 2, runner.pids()[0]
            run = KillAfter(runner, victim, after=1) if kill else runner
            report = collect(env, None, tasks, tmp_path, batch, runner=run)
            assert report.collected == 4 and report.unscored == 0
            if kill:  # Ray restarted worker 0: a new process, started with the spec's weights,
                assert _pids(runner)[0] != victim  # which loads the synced ones before a shard
                again = collect(env, None, tasks, tmp_path / "again", batch, runner=runner)
                assert again.collected == 4  # (worker 0 takes the first of its 2 shards)
            assert held() == [now, now]
    rows = read_rollouts(tmp_path)
    assert rows.group_by("policy_version").len().sort("policy_version")["len"].to_list() == [4] * 3


def test_workers_get_the_env_servers_token(cluster, tmp_path, monkeypatch):
    """The token set here reaches the workers (a worker on another node would not inherit it;
    this cluster's workers were started before it was set)."""
    from env_processes import serve_env
    from ports import free_port  # tests/ is on the path

    port = free_port()
    monkeypatch.setenv("GYMFLOW_ENV_TOKEN", "s3cret")  # env serve reads it too
    server = serve_env(port, TASKS, "gymflow")
    try:
        env = CounterEnvironment()
        tasks, settings = _tasks(env), _settings(num_repeats=2)
        url = f"http://127.0.0.1:{port}"
        with RayWorkers(env, tasks, settings, workers=2, env_url=url) as runner:
            report = collect(env, None, tasks, tmp_path, settings, env_url=url, runner=runner)
    finally:
        server.kill()
        server.wait(10)
    assert report.collected == 10 and report.unscored == 0, report.failures


def test_a_worker_builds_its_environment_once_not_once_per_shard(cluster, tmp_path):
    """math verifies in a process pool: one pool per worker, however many shards it runs."""
    from gymflow.env.registry import get_env

    env = get_env("math")
    tasks = _tasks(env, ROOT / "environments" / "math" / "examples" / "tasks.jsonl")
    settings = _settings(policy_spec="scripted:math", reward_range=env.reward_range)
    with RayWorkers(env, tasks, settings, workers=1, shard_size=4) as runner:
        report = collect(env, None, tasks, tmp_path, settings, runner=runner)
        children = psutil.Process(runner.pids()[0]).children(recursive=True)
    assert report.engine["shards"] == 5 and report.collected == 20 and not report.failures
    pool = max(1, min(4, os.cpu_count() or 1))  # VerifyPool's size; spawn adds a tracker
    assert 0 < len(children) <= pool + 1, [c.cmdline()[-1:] for c in children]


def test_a_worker_that_cannot_start_says_why(cluster, tmp_path):
    env = CounterEnvironment()
    settings = _settings(policy_spec=f"transformers:{tmp_path / 'no-model'}")
    with pytest.raises(GymflowError) as caught:
        RayWorkers(env, _tasks(env), settings, workers=1, max_restarts=0)
    assert "no-model" in str(caught.value)


def test_cli_collects_on_its_own_local_cluster(tmp_path):
    """The command starts a local cluster, collects, stops it: none of its processes outlive it."""
    out = tmp_path / "out"
    cmd = [GYMFLOW, "rollouts", "collect", "--env", "counter", "--tasks"]
    cmd += [str(TASKS), "--policy", "scripted:counter", "--out", str(out)]
    cmd += ["--num-repeats", "2", "--engine", "ray", "--ray-workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    assert "10 collected" in stdout and "ray: 2 workers" in stdout, stdout
    report = json.loads((out / "collect.json").read_text())
    assert report["engine"]["name"] == "ray" and report["engine"]["cluster_start_s"] > 0
    assert read_rollouts(out)["reward"].to_list() == [1.0] * 10
    # Ray names a local cluster's session folder after the process that started it
    session = f"_{proc.pid}/"

    def left() -> list[str]:
        return [
            p.info["name"]
            for p in psutil.process_iter(["name", "cmdline"])
            if any(session in part for part in p.info["cmdline"] or [])
        ]

    deadline = time.monotonic() + 15  # the processes the shutdown signalled end within seconds
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left(), left()


def test_cli_fails_at_once_where_no_cluster_answers(tmp_path):
    from typer.testing import CliRunner

    from gymflow.cli.main import app

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    args = ["rollouts", "collect", "--env", "counter", "--tasks", str(TASKS), "--policy"]
    args += ["scripted:counter", "--out", str(tmp_path), "--engine", "ray", "--ray-address", dead]
    result = CliRunner().invoke(app, args)  # Ray's own connect would retry for minutes
    assert result.exit_code == 2
    assert f"[backend_unavailable] no Ray cluster answers at {dead}" in result.output


def test_cli_refuses_a_ray_address_for_the_local_engine(tmp_path):
    from typer.testing import CliRunner

    from gymflow.cli.main import app

    args = ["rollouts", "collect", "--env", "counter", "--tasks", str(TASKS), "--policy"]
    args += ["scripted:counter", "--out", str(tmp_path), "--ray-address", "127.0.0.1:6379"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "--ray-address: Value error, a Ray address is for the ray engine" in result.output


def _held(runner: RayWorkers) -> list[str]:
    """Each worker's weights digest, waiting for workers Ray is restarting."""
    return _ask(runner, "digest")


def _pids(runner: RayWorkers) -> list[int]:
    return _ask(runner, "pid")


def _ask(runner: RayWorkers, method: str, timeout_s: float = 60) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get([getattr(a, method).remote() for a in runner.actors])
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _gold(tasks):
    return _policy("scripted:counter", tasks)


def _policy(spec: str, tasks):
    from gymflow.policy.spec import load_policy

    return load_policy(spec, tasks=tasks)
