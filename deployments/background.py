"""``gymflow deploy --background``: the UIs' servers and the deployments' runner as detached
processes, each with a pid file and a log under ``<home>/.prefect/background/``.

Two processes, started in their own sessions so closing the terminal does not stop them:

* ``ui`` — ``gymflow ui`` (the Prefect server with its UI, and the MLflow UI), unless one
  already answers for this project (then it is used, and not stopped by ``--stop``);
* ``serve`` — ``gymflow deploy`` in the foreground mode, registering the deployments and
  running their flow runs (Prefect's runner: the worker of served deployments).

:func:`stop` ends them (serve first, then ui) with SIGTERM, then SIGKILL after a grace period.
A pid file names a process only while that process is alive and is one of ours (its command
line says ``gymflow.cli.main``), so a stale file after a reboot is reported as such
(:mod:`gymflow.core.detached`).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gymflow.core import detached
from gymflow.core.detached import log_tail
from gymflow.core.failures import FailureKind, GymflowError

FOLDER = Path(".prefect") / "background"
MARKER = b"gymflow"
"""What a background process's command line holds (``python -m gymflow.cli.main …``)."""
NAMES = ("serve", "ui")  # stop order


@dataclass(frozen=True)
class Process:
    name: str
    pid: int | None
    alive: bool
    log: Path

    def describe(self) -> str:
        if self.pid is None:
            return f"{self.name}: not started by gymflow deploy --background"
        state = "running" if self.alive else "not running (stale pid file)"
        return f"{self.name}: pid {self.pid} {state}; log {self.log}"


def folder(home: Path) -> Path:
    return home / FOLDER


def process(home: Path, name: str) -> Process:
    """What the pid file of ``name`` says, checked against the running processes."""
    pid_file = folder(home) / f"{name}.pid"
    log = folder(home) / f"{name}.log"
    pid = detached.read_pid(pid_file)
    if pid is None:
        return Process(name, None, False, log)
    return Process(name, pid, _is_ours(pid), log)


def write_pid(home: Path, name: str, pid: int) -> Path:
    path = folder(home) / f"{name}.pid"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid}\n")
    return path


def forget_pid(home: Path, name: str, pid: int) -> None:
    """Remove ``name``'s pid file if it still names ``pid`` (another start may have replaced it)."""
    path = folder(home) / f"{name}.pid"
    try:
        if int(path.read_text().strip()) == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def start(home: Path, name: str, args: list[str], env: dict[str, str]) -> Process:
    """``python -m gymflow.cli.main ARGS`` detached (own session, stdin closed, output to its
    log); its pid file is written here. ``bad_request`` if one is running already."""
    running = process(home, name)
    if running.alive:
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{name} is running already (pid {running.pid}); `gymflow deploy --stop` first",
        )
    log = folder(home) / f"{name}.log"
    pid_file = folder(home) / f"{name}.pid"
    command = [sys.executable, "-m", "gymflow.cli.main", *args]
    detached.launch(command, home, env, log, pid_file)
    return process(home, name)


def wait_until(check, proc: Process, timeout_s: float, what: str) -> None:
    """Poll ``check()`` until true; ``internal_error`` with the log's tail if the process
    exits first, ``timeout`` if it does not come within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if not _is_ours(proc.pid):
            raise GymflowError(
                FailureKind.INTERNAL_ERROR,
                f"the background {proc.name} exited before {what}: {log_tail(proc.log)}",
            )
        if time.monotonic() > deadline:
            raise GymflowError(
                FailureKind.TIMEOUT,
                f"no {what} after {timeout_s:.0f} s (the {proc.name} runs on, pid {proc.pid}; "
                f"log {proc.log})",
            )
        time.sleep(0.5)


def stop(home: Path, grace_s: float = 30.0) -> list[str]:
    """SIGTERM every background process (serve, then ui), SIGKILL after ``grace_s``; one line
    per process saying what happened. Pid files are removed."""
    said = []
    for name in NAMES:
        proc = process(home, name)
        if proc.pid is None:
            continue
        if proc.alive:
            said.append(f"{name}: {detached.terminate(proc.pid, MARKER, grace_s)}")
        else:
            said.append(f"{name}: pid {proc.pid} was not running (stale pid file removed)")
        forget_pid(home, name, proc.pid)
    return said


def answers(url: str) -> bool:
    """True when a Prefect API answers ``/health`` at ``url`` (``…/api``)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def ui_json(home: Path) -> dict:
    try:
        return json.loads((home / ".ui.json").read_text())
    except (OSError, ValueError):
        return {}


def _is_ours(pid: int | None) -> bool:
    """``pid`` is alive and runs gymflow's command line (not a recycled pid)."""
    return detached.is_alive(pid, MARKER)
