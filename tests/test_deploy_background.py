"""``gymflow deploy`` keeps running without a terminal, and stops when told, with the real
Prefect server (``gymflow ui`` as a child process) and real flow runs.

* A served deployment's schedule stays active when ``gymflow deploy`` stops (``prefect.serve``
  paused every schedule on the way out), and a deploy whose Prefect server is gone still exits
  on Ctrl-C (it used to hang after "Pausing all deployments…").
* ``--background`` starts the server, the MLflow UI and the runner as detached processes with
  pid files and logs; a collection triggered through the API then runs with nothing in the
  foreground; ``--status`` shows the processes, schedules and runs; ``--stop`` ends them all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ui_process import GYMFLOW, UIProcess, api, free_port

EXAMPLES = Path(__file__).resolve().parents[1] / "environments/counter/examples/tasks.jsonl"
SMOKE = ["--smoke", "--cron", "0 3 * * *", "--eval-cron", ""]


@pytest.fixture(autouse=True)
def own_prefect_settings(monkeypatch):
    """Children configure Prefect for their own home: drop the settings this pytest process
    may have exported for another one (importing gymflow.deployments does, for the checkout)."""
    for name in [n for n in os.environ if n.startswith(("PREFECT_", "MLFLOW_"))]:
        monkeypatch.delenv(name)


def _registered(prefect: str, names: set[str], proc=None, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        found = {d["name"]: d for d in api(f"{prefect}/api/deployments/filter", {})}
        if names <= set(found):
            return found
        assert proc is None or proc.poll() is None, "gymflow deploy exited before registering"
        assert time.monotonic() < deadline, f"{names} not registered in {timeout_s} s"
        time.sleep(1)


def _until(condition, what: str, timeout_s: float = 60) -> None:
    """Poll ``condition`` until it holds (no fixed sleep: the wait is as long as it takes)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.2)


def _ready(prefect: str, deployment_id: str) -> bool:
    """Prefect marks a served deployment READY once its runner has polled for work."""
    return api(f"{prefect}/api/deployments/{deployment_id}").get("status") == "READY"


def _answers(prefect: str) -> bool:
    try:
        api(f"{prefect}/api/health", attempts=1)
    except Exception:  # noqa: BLE001 - refused, reset or timed out: gone either way
        return False
    return True


def _deploy(home: Path, log: Path, *args: str) -> subprocess.Popen:
    env = os.environ | {"GYMFLOW_HOME": str(home)}
    out = log.open("w")
    return subprocess.Popen([GYMFLOW, "deploy", *args], env=env, stdout=out, stderr=out)


def test_schedules_stay_active_and_a_deploy_without_its_server_still_exits(tmp_path):
    with UIProcess(tmp_path) as ui:
        first = _deploy(tmp_path, tmp_path / "first.log", *SMOKE)
        nightly = _registered(ui.prefect, {"nightly"}, first)["nightly"]
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, (tmp_path / "first.log").read_text()
        after = api(f"{ui.prefect}/api/deployments/{nightly['id']}")
        assert not after["paused"] and [s["active"] for s in after["schedules"]] == [True]

        second = _deploy(tmp_path, tmp_path / "second.log", *SMOKE)
        deadline = time.monotonic() + 240
        while "deployments registered" not in (tmp_path / "second.log").read_text():
            assert second.poll() is None and time.monotonic() < deadline
            time.sleep(1)
        _until(lambda: _ready(ui.prefect, nightly["id"]), "the runner polls the server")
        prefect = ui.prefect
    # the server is gone now (UIProcess stopped it); Ctrl-C must still end the deploy
    _until(lambda: not _answers(prefect), "the Prefect server is gone")
    started = time.monotonic()
    second.send_signal(signal.SIGINT)
    code = second.wait(timeout=90)
    took = time.monotonic() - started
    log = (tmp_path / "second.log").read_text()
    assert "stopping (Ctrl-C)" in log, log
    assert took < 60, f"exited after {took:.0f} s: {log[-2000:]}"
    print(f"deploy exited {took:.1f} s after Ctrl-C with its server gone (code {code})")


def test_background_deploy_serves_without_a_terminal_then_stops(tmp_path):
    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    options = tmp_path / "collect.json"
    out = tmp_path / "collected"
    options.write_text(
        json.dumps({"env": "counter", "tasks": str(EXAMPLES), "policy": "scripted:counter",
                    "out": str(out), "num_repeats": 2})
    )  # fmt: skip
    ports = ["--prefect-port", str(free_port()), "--mlflow-port", str(free_port())]
    args = [GYMFLOW, "deploy", "--background", *SMOKE, "--collect-options", str(options), *ports]
    pids: dict[str, int] = {}
    try:
        started = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "serve: pid" in started.stdout and "ui: pid" in started.stdout, started.stdout
        for name in ("ui", "serve"):
            pids[name] = int((tmp_path / f".prefect/background/{name}.pid").read_text())
        prefect = f"http://127.0.0.1:{ports[1]}"
        collect = _registered(prefect, {"nightly", "champion-eval", "collect"})["collect"]

        run = api(f"{prefect}/api/deployments/{collect['id']}/create_flow_run", {})
        deadline = time.monotonic() + 300
        while (state := api(f"{prefect}/api/flow_runs/{run['id']}"))["state_type"] not in (
            "COMPLETED", "FAILED", "CRASHED",
        ):  # fmt: skip
            assert time.monotonic() < deadline, f"the run stayed {state['state_name']}"
            time.sleep(2)
        assert state["state_type"] == "COMPLETED", state["state"]
        assert list(out.glob("rollouts/*.parquet")), "the background runner wrote no rollouts"

        status = subprocess.run(
            [GYMFLOW, "deploy", "--status"], env=env, capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 0, status.stdout + status.stderr
        lines = status.stdout
        assert (
            f"serve: pid {pids['serve']} running" in lines
            and f"ui: pid {pids['ui']} running" in lines
        )
        assert "rlvr-lifecycle-scheduled/nightly: 0 3 * * * (UTC), active; next run" in lines, lines
        assert "collect-rollouts/collect: no schedule, on demand" in lines, lines
        assert "Completed" in lines.split("latest runs:")[1], lines
    finally:
        stopped = subprocess.run(
            [GYMFLOW, "deploy", "--stop"], env=env, capture_output=True, text=True, timeout=120
        )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert f"serve: pid {pids['serve']} stopped" in stopped.stdout, stopped.stdout
    assert f"ui: pid {pids['ui']} stopped" in stopped.stdout, stopped.stdout
    for pid in pids.values():
        assert (
            not Path(f"/proc/{pid}").exists()
            or b"gymflow" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    after = subprocess.run(
        [GYMFLOW, "deploy", "--status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert after.returncode == 1 and "no Prefect server answers" in after.stdout, after.stdout


def test_systemd_units_run_this_python_with_the_options_given(tmp_path):
    """``--systemd DIR`` writes the two units and starts nothing (no server is needed)."""
    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    units = tmp_path / "units"
    args = [GYMFLOW, "deploy", "--systemd", str(units), *SMOKE, "--set", "grpo.max_steps=5"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ui = (units / "gymflow-ui.service").read_text()
    deploy = (units / "gymflow-deploy.service").read_text()
    python = f"{Path(GYMFLOW).parent}/python"
    assert f"ExecStart={python}" in ui.replace("python3.11", "python")
    assert "-m gymflow.cli.main ui --prefect-port 4200 --mlflow-port 5000" in ui
    assert f"Environment=GYMFLOW_HOME={tmp_path}" in deploy and "After=gymflow-ui.service" in deploy
    assert "deploy --cron '0 3 * * *' --eval-cron '' --name nightly" in deploy
    assert "--set grpo.max_steps=5 --smoke --wait 300" in deploy
    assert not (tmp_path / ".prefect" / "background").exists()
