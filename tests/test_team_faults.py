"""Fault drills on a real team stack (PostgreSQL, ``mlflow server``, ``prefect server``, two
``prefect worker`` processes on one pool whose training limit is 1), each lifecycle the micro
budget run by a worker.

1. Two lifecycles started at once: the second waits in the pool's training queue (limit 1),
   then runs.
   While the first works, PostgreSQL restarts and the MLflow server is down for 60 s: MLflow's
   client waits and retries (each retry in the worker's log), and both runs finish with every
   stage's MLflow run there exactly once.
2. The worker running a lifecycle is killed during SFT, after its first checkpoint; the run is
   retried as the Prefect UI's Retry does, the other worker picks it up, the finished stages
   come from the shared result storage and SFT resumes from its checkpoint. The Prefect server
   is killed and started again while the retry works; the run still finishes (or a second
   retry does) with one registry version per run.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from team_stack import (
    MICRO,
    client_env,
    flow_run,
    gymflow,
    prefect,
    run_deployment,
    start_stack,
    stop_stack,
    wait_final,
    wait_for,
)

pytestmark = pytest.mark.slow
STAGES = {
    "generate_tasks", "resolve_policy", "profile_verifier", "verifier_drift", "baseline_eval",
    "sft", "grpo", "sft_control", "heldout_gate", "promote",
}  # fmt: skip


@pytest.fixture(scope="module")
def drills(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    stack, client = start_stack(folder, workers=2, train_limit=1)
    env = client_env(client, stack.home)
    pool = stack.settings.pool
    longer_sft = [arg.replace("sft.max_steps=4", "sft.max_steps=8") for arg in MICRO]
    other_seed = [*MICRO, "--set", "seed=2"]  # not "nothing new since the first"
    try:
        for name, budget in (("first", MICRO), ("second", other_seed), ("third", longer_sft)):
            done = gymflow(["deploy", "--pool", pool, "--name", name, "--cron", "",
                            "--eval-cron", "", *budget], env, stack.home, 180)  # fmt: skip
            assert done.returncode == 0, done.stderr
        yield stack, client
    finally:
        stop_stack(stack)


def _run_dir(stack, flow_run_id: str) -> Path:
    return stack.home / "runs" / f"sched-{flow_run_id}"


def _stage_runs(client, run_id: str) -> dict[str, int]:
    from mlflow import MlflowClient

    server = MlflowClient(
        tracking_uri=client["MLFLOW_TRACKING_URI"], registry_uri=client["MLFLOW_TRACKING_URI"]
    )
    experiment = server.get_experiment_by_name("gymflow").experiment_id
    found = server.search_runs([experiment], f"tags.`gymflow.run_id` = '{run_id}'", max_results=500)
    counts: dict[str, int] = {}
    for run in found:
        if "gymflow.stage" in run.data.tags:
            stage = run.data.tags["gymflow.stage"]
            counts[stage] = counts.get(stage, 0) + 1
    return counts


def test_two_lifecycles_take_turns_through_mlflow_and_postgres_outages(drills):
    from gymflow.stack import postgres
    from gymflow.stack.control import start_server

    stack, client = drills
    api = stack.settings.prefect_api
    first = run_deployment(api, "rlvr-lifecycle-scheduled/first")
    second = run_deployment(api, "rlvr-lifecycle-scheduled/second")
    dirs = {i: _run_dir(stack, i) for i in (first, second)}

    def one_running():
        states = {i: flow_run(api, i)["state_type"] for i in dirs}
        running = [i for i, state in states.items() if state == "RUNNING"]
        queued = [i for i, state in states.items() if state in ("SCHEDULED", "PENDING")]
        return running if len(running) == 1 and len(queued) == 1 else None

    (holder,) = wait_for(one_running, 600, "one lifecycle running, the other queued")
    waiting = second if holder == first else first
    wait_for(lambda: (dirs[holder] / "data").exists(), 600, "the first stage's output")
    postgres.restart(stack.pg)  # both servers' database goes away and comes back
    mlflow = next(s for s in stack.servers() if s.name == "mlflow")
    os.kill(stack.alive(mlflow), signal.SIGTERM)
    wait_for(lambda: stack.alive(mlflow) is None, 60, "the MLflow server to stop")
    down_at = time.monotonic()
    assert flow_run(api, waiting)["state_type"] in ("SCHEDULED", "PENDING")  # still queued
    time.sleep(60)  # the outage itself: 60 s without a tracking server
    start_server(stack, "mlflow")
    outage_s = time.monotonic() - down_at
    for run_id in (holder, waiting):
        final = wait_final(api, run_id, 1500)
        assert final["state_type"] == "COMPLETED", (run_id, final["state"])
    summaries = {i: json.loads((dirs[i] / "summary.json").read_text()) for i in dirs}
    for run_id in dirs:
        stages = _stage_runs(client, f"sched-{run_id}")
        assert set(stages) >= STAGES - {"verifier_drift"}, stages
        assert all(n == 1 for n in stages.values()), stages  # nothing twice, nothing lost
    # the queued one started only once the other had ended (the training queue's limit)
    ended = flow_run(api, holder)["end_time"]
    assert flow_run(api, waiting)["start_time"] >= ended, (ended, flow_run(api, waiting))
    logs = "".join(p.read_text(errors="replace") for p in (stack.root / "logs").glob("worker-*"))
    assert "urllib3.connectionpool - Retrying" in logs  # the waits for MLflow, said in the log
    print(f"MLflow down {outage_s:.0f} s; runs {sorted(s['wall_s'] for s in summaries.values())}")


def test_a_killed_worker_run_resumes_on_the_other_worker(drills):
    from gymflow.stack.control import start_server

    stack, client = drills
    api = stack.settings.prefect_api
    run_id = run_deployment(api, "rlvr-lifecycle-scheduled/third")
    run_dir = _run_dir(stack, run_id)
    trainer = run_dir / "sft" / "trainer"
    wait_for(lambda: any(trainer.glob("checkpoint-*")), 900, "SFT's first checkpoint")
    engine = _flow_run_process(run_id)
    worker = _parent(engine)
    os.kill(engine, signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)  # the machine running it is gone
    retry = {"state": {"type": "SCHEDULED", "name": "AwaitingRetry"}, "force": True}
    prefect(api, f"/flow_runs/{run_id}/set_state", retry)
    # the other worker picks it up (the retry is the queue's one run again)
    wait_for(lambda: flow_run(api, run_id)["state_type"] == "RUNNING", 300, "the retry running")
    assert _parent(_flow_run_process(run_id)) != worker
    prefect_server = next(s for s in stack.servers() if s.name == "prefect")
    os.killpg(stack.alive(prefect_server), signal.SIGKILL)
    threading.Event().wait(5)
    start_server(stack, "prefect")
    final = wait_final(api, run_id, 1500)
    if final["state_type"] != "COMPLETED":  # the run lost its server: its Retry finishes it
        prefect(api, f"/flow_runs/{run_id}/set_state", retry)
        final = wait_final(api, run_id, 1500)
    assert final["state_type"] == "COMPLETED", final["state"]
    stages = _stage_runs(client, f"sched-{run_id}")
    before_sft = {"generate_tasks", "resolve_policy", "profile_verifier", "baseline_eval"}
    assert all(stages[s] == 1 for s in before_sft), stages  # reused from the shared results
    assert stages["sft"] == 2, stages  # the killed attempt's and the retry's
    resumed = _finished_sft(client, f"sched-{run_id}").data.params.get("resumed_from", "")
    assert "sft/trainer/checkpoint-" in resumed, resumed  # from the killed attempt's checkpoint
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["sft_ran"] and "registry" in summary
    from mlflow import MlflowClient

    versions = MlflowClient(
        tracking_uri=client["MLFLOW_TRACKING_URI"], registry_uri=client["MLFLOW_TRACKING_URI"]
    ).search_model_versions("name = 'gymflow-tool_call'")
    run_ids = [v.tags.get("gymflow.run_id") for v in versions]
    assert len(run_ids) == len(set(run_ids)) == 3, run_ids  # one version per run, none twice


def _finished_sft(client, run_id: str):
    from mlflow import MlflowClient

    server = MlflowClient(
        tracking_uri=client["MLFLOW_TRACKING_URI"], registry_uri=client["MLFLOW_TRACKING_URI"]
    )
    experiment = server.get_experiment_by_name("gymflow").experiment_id
    query = f"tags.`gymflow.run_id` = '{run_id}' and tags.`gymflow.stage` = 'sft'"
    (run,) = [r for r in server.search_runs([experiment], query) if r.info.status == "FINISHED"]
    return run


def _flow_run_process(flow_run_id: str) -> int:
    """The pid of the process running flow run ``flow_run_id`` (its environment names it)."""

    mark = f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode()

    def marked(pid: int) -> bool:
        try:
            return mark in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False

    def find():  # the topmost marked process: its children (trainers) inherit the mark
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
        return next((pid for pid in pids if marked(pid) and not marked(_parent(pid))), None)

    return wait_for(find, 120, f"the process of flow run {flow_run_id}")


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
