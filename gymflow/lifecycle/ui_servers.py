"""The project's two UIs as child processes: the Prefect server and the MLflow UI, on loopback.

Both read the project home's stores (``.prefect/`` and ``mlruns/mlflow.db``), so every
``gymflow run`` made there shows up (a team's MLflow server is its own UI: runs tracked there
link to it, :mod:`gymflow.lifecycle.ui_links`). The Prefect server gets its API URL, UI API URL, host
and port from one place (setting only ``--port`` leaves the UI calling port 4200: "Can't connect
to Server API"). Each server runs in its own process group, so stopping one stops every process
it started (Prefect's services, MLflow's workers). :meth:`UIServers.stop` sends SIGTERM, then
SIGKILL to what is left after ``grace_s``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

HOST = "127.0.0.1"


@dataclass
class UIServers:
    """``with UIServers(home) as ui: ui.prefect_url, ui.mlflow_url``"""

    home: Path
    prefect_port: int = 4200
    mlflow_port: int = 5000
    ready_timeout_s: float = 120.0
    grace_s: float = 10.0
    experiment_id: str = ""
    """The project's MLflow experiment (made at start if the store had none)."""
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    @property
    def prefect_url(self) -> str:
        return f"http://{HOST}:{self.prefect_port}"

    @property
    def mlflow_url(self) -> str:
        return f"http://{HOST}:{self.mlflow_port}"

    def start(self) -> float:
        """Start both and wait until both answer; returns the seconds that took."""
        started = time.perf_counter()
        for name, port in (("prefect", self.prefect_port), ("mlflow", self.mlflow_port)):
            _refuse_busy_port(name, port)
        self.experiment_id = _experiment_id(self._store_file()) or ""
        if not self.experiment_id:  # a new store: make it (and the experiment) before the UI
            self._prepare_store()
        logs = self.home / ".ui-logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name, command in (("prefect", self._prefect()), ("mlflow", self._mlflow())):
            self.logs[name] = logs / f"{name}.log"
            with self.logs[name].open("wb") as log:
                env = self._env() | (self._mlflow_env() if name == "mlflow" else {})
                self.processes[name] = subprocess.Popen(
                    command, env=env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True, cwd=self.home,
                )  # fmt: skip
        self._wait_ready()
        return time.perf_counter() - started

    def stop(self) -> dict[str, int | None]:
        """SIGTERM each process group, SIGKILL what is left after ``grace_s``; exit codes."""
        for proc in self.processes.values():
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.processes.values():
            _signal_group(proc, signal.SIGKILL)  # the group's stragglers too
            if proc.poll() is None:
                proc.wait(timeout=5)
            _wait_group_gone(proc.pid, timeout_s=5.0)
        return {name: proc.returncode for name, proc in self.processes.items()}

    def dead(self) -> str | None:
        """The name of a server that exited on its own, if any."""
        return next((n for n, p in self.processes.items() if p.poll() is not None), None)

    def log_tail(self, name: str, lines: int = 5) -> str:
        text = self.logs[name].read_text(errors="replace") if name in self.logs else ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def __enter__(self) -> UIServers:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        from gymflow.lifecycle.home import configure_prefect

        configure_prefect(self.home)  # PREFECT_HOME and friends, as `gymflow run` uses them
        api = f"{self.prefect_url}/api"
        return os.environ | {
            "PREFECT_API_URL": api,
            "PREFECT_UI_API_URL": api,
            "PREFECT_UI_URL": self.prefect_url,
            "PREFECT_SERVER_API_HOST": HOST,
            "PREFECT_SERVER_API_PORT": str(self.prefect_port),
            "MLFLOW_DISABLE_TELEMETRY": "true",
        }

    def _prefect(self) -> list[str]:
        prefect = [sys.executable, "-m", "prefect"]
        return [*prefect, "server", "start", "--host", HOST, "--port", str(self.prefect_port)]

    def _store_file(self) -> Path:
        return self.home / "mlruns" / "mlflow.db"

    def _prepare_store(self) -> None:
        """The store and the experiment (its kind and description tags) as runs make them."""
        import mlflow

        from gymflow.core.tracking_store import home_store_uri
        from gymflow.lifecycle.tracking import EXPERIMENT, configure

        # the home's own store, which this MLflow UI serves, even when runs go to a server
        configure(self.home, home_store_uri(self.home))
        self.experiment_id = mlflow.get_experiment_by_name(EXPERIMENT).experiment_id

    def _mlflow(self) -> list[str]:
        """MLflow's app under uvicorn, configured as ``mlflow server`` configures it: that
        command's own start-up (its CLI, store checks, job runner) costs several times the CPU
        and wall time of the app itself."""
        return [
            sys.executable, "-m", "uvicorn", "--host", HOST, "--port", str(self.mlflow_port),
            "--workers", "1", "--log-level", "warning", "mlflow.server.fastapi_app:app",
        ]  # fmt: skip

    def _mlflow_env(self) -> dict[str, str]:
        # The variables `mlflow server` (MLflow 3.17, mlflow/server/__init__.py) hands its app.
        return {
            "_MLFLOW_SERVER_FILE_STORE": f"sqlite:///{self._store_file().resolve()}",
            "_MLFLOW_SERVER_ARTIFACT_ROOT": (self.home / "mlruns" / "artifacts").resolve().as_uri(),
            "_MLFLOW_SERVER_SERVE_ARTIFACTS": "true",
            "_MLFLOW_SGI_NAME": "uvicorn",
        }

    def _wait_ready(self) -> None:
        checks = {
            "prefect": f"{self.prefect_url}/api/health",
            "mlflow": f"{self.mlflow_url}/health",
        }
        deadline = time.monotonic() + self.ready_timeout_s
        while checks:
            if (name := self.dead()) is not None:
                raise GymflowError(
                    FailureKind.BACKEND_UNAVAILABLE,
                    f"the {name} UI exited at start ({self.log_tail(name, 1)}); "
                    f"log: {self.logs[name]}",
                )
            checks = {n: url for n, url in checks.items() if not _answers(url)}
            if checks and time.monotonic() > deadline:
                raise GymflowError(
                    FailureKind.TIMEOUT,
                    f"{', '.join(checks)} UI not answering after {self.ready_timeout_s:.0f} s; "
                    f"logs: {self.logs[next(iter(checks))].parent}",
                )
            time.sleep(0.1)


def _experiment_id(store: Path) -> str | None:
    """The gymflow experiment's id read from the sqlite store itself: importing MLflow here
    would cost seconds of the CPU the two starting servers need."""
    import sqlite3

    from gymflow.lifecycle.tracking import EXPERIMENT

    if not store.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
            row = db.execute(
                "SELECT experiment_id FROM experiments WHERE name = ?", (EXPERIMENT,)
            ).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _refuse_busy_port(name: str, port: int) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"port {port} for the {name} UI is in use (another `gymflow ui`?); "
                f"pick another with --{name}-port",
            ) from None


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Until no process of group ``pgid`` is left (a killed process takes a moment to go)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
