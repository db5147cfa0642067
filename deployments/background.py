"""``gymflow deploy --background``: the UIs' servers and the deployments' runner as detached
processes, each with a pid file and a log under ``<home>/.prefect/background/``.

Two processes, started in their own sessions so closing the terminal does not stop them:

* ``ui`` — ``gymflow ui`` (the Prefect server with its UI, and the MLflow UI), unless one
  already answers for this project (then it is used, and not stopped by ``--stop``);
* ``serve`` — ``gymflow deploy`` in the foreground mode, registering the deployments and
  running their flow runs (Prefect's runner: the worker of served deployments).

:func:`stop` ends them (serve first, then ui) with SIGTERM, then SIGKILL after a grace period.
A pid file names a process only while that process is alive and is one of ours (its command
line says ``gymflow.cli.main``), so a stale file after a reboot is reported as such.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

FOLDER = Path(".prefect") / "background"
_LAUNCH = """\
import subprocess, sys
from pathlib import Path
child = subprocess.Popen(sys.argv[2:], start_new_session=True)
Path(sys.argv[1]).write_text(f"{child.pid}\\n")
"""
"""Started through a launcher that exits at once, so the process is init's child from its first
moment: a parent that exits later would change its parent pid, which the parent watchdog of
``gymflow ui`` and ``gymflow deploy`` (:mod:`gymflow.core.watchdog`) reads as its own death
(it then stops the servers)."""
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
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
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
    folder(home).mkdir(parents=True, exist_ok=True)
    log = folder(home) / f"{name}.log"
    pid_file = folder(home) / f"{name}.pid"
    pid_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "gymflow.cli.main", *args]
    try:
        with log.open("ab") as out:
            subprocess.run(
                [sys.executable, "-c", _LAUNCH, str(pid_file), *command], cwd=home, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=True,
                timeout=120,
            )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise GymflowError(
            FailureKind.INTERNAL_ERROR, f"could not start the {name}: {exc}: {log_tail(log)}"
        ) from None
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
            os.kill(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while _is_ours(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _is_ours(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)  # its session: the servers it started too
                said.append(f"{name}: pid {proc.pid} killed after {grace_s:.0f} s")
            else:
                said.append(f"{name}: pid {proc.pid} stopped")
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


def log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def ui_json(home: Path) -> dict:
    try:
        return json.loads((home / ".ui.json").read_text())
    except (OSError, ValueError):
        return {}


def _is_ours(pid: int | None) -> bool:
    """``pid`` is alive (not a zombie) and runs gymflow's command line (not a recycled pid).

    A process in the middle of ``exec`` (slow under disk load) shows an empty command line for
    a while: that counts as ours, its state says it is alive.
    """
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return True  # no /proc: trust the pid
    if state in ("Z", "X"):  # exited, not yet reaped
        return False
    return not cmdline or b"gymflow" in cmdline
