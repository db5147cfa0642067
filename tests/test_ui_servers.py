"""``gymflow ui``: both servers answer on loopback, the Prefect UI calls the API on the port
it was given, the addresses are printed and saved for runs to link to, and Ctrl-C or SIGTERM
stops every process the servers started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request

import pytest
from ui_process import GYMFLOW, UIProcess, free_port


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def _group_alive(pid: int) -> list[int]:
    """Processes still in process group ``pid`` (each server runs in its own group)."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid="], capture_output=True, text=True).stdout
    return [int(p) for p, g in (line.split() for line in out.splitlines()) if int(g) == pid]


def _server_groups(ui_pid: int) -> dict[str, int]:
    """The process groups of ``gymflow ui``'s two servers (children leading their group), by
    server, picked by command line so no other child is taken for one. ``-ww``: without a
    terminal ps cuts command lines at 80 columns, which hid the watchdog's name behind a long
    checkout path."""
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,pgid=,args="], capture_output=True, text=True
    ).stdout
    rows = [line.split(None, 3) for line in out.splitlines()]
    children = {args: int(pgid) for pid, ppid, pgid, args in rows if int(ppid) == ui_pid}
    groups = {
        name: pgid
        for args, pgid in children.items()
        for name, marker in (("prefect", "prefect server start"), ("mlflow", "mlflow.server"))
        if marker in args
    }
    assert len(groups) == 2, f"expected a Prefect and an MLflow server among {children}"
    return groups


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_ui_serves_both_and_stops_cleanly(tmp_path, sig):
    home = tmp_path / "home"
    home.mkdir()
    with UIProcess(home) as ui:
        assert f"Prefect UI: {ui.prefect}/runs\n" in ui.lines
        assert any(line.startswith(f"MLflow UI:  {ui.mlflow}/#/experiments/") for line in ui.lines)
        assert _get(f"{ui.prefect}/api/health") == (200, "true")
        assert _get(f"{ui.mlflow}/health")[0] == 200
        status, settings = _get(f"{ui.prefect}/ui-settings")
        assert json.loads(settings)["api_url"] == f"{ui.prefect}/api"  # not :4200's
        saved = json.loads((home / ".ui.json").read_text())
        assert saved == {"prefect": ui.prefect, "mlflow": ui.mlflow}
        status, experiments = _get(
            f"{ui.mlflow}/api/2.0/mlflow/experiments/get-by-name?experiment_name=gymflow"
        )
        tags = {t["key"]: t["value"] for t in json.loads(experiments)["experiment"]["tags"]}
        assert tags["mlflow.experimentKind"] == "custom_model_development"
        assert "lifecycle-<run id>" in tags["mlflow.note.content"]
        groups = list(_server_groups(ui.proc.pid).values())
        assert all(_group_alive(g) for g in groups)
        out = ui.stop(sig)
    assert ui.proc.returncode == 0, out
    assert "stopped both UIs" in out
    assert not [g for g in groups if _group_alive(g)], "a server process outlived gymflow ui"
    for port in (ui.prefect_port, ui.mlflow_port):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine
            sock.bind(("127.0.0.1", port))  # nothing listens there any more


def test_busy_port_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [GYMFLOW, "ui", "--prefect-port", str(port),
             "--mlflow-port", str(free_port())],
            env=os.environ | {"GYMFLOW_HOME": str(tmp_path)}, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: [bad_request] port {port} for the prefect UI is in use (another `gymflow ui`?); "
        "pick another with --prefect-port"
    )
