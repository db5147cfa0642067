"""Processes that outlive the command that started them: a pid file, a log, a clean stop.

``gymflow deploy --background`` and ``gymflow stack up`` start their servers and workers this
way. A process is started through a launcher that exits at once, so it is init's child from
its first moment (a parent that exits later would change its parent pid, which the parent
watchdog of gymflow's long-running commands, :mod:`gymflow.core.watchdog`, reads as its own
death), in its own session (closing the terminal does not stop it), stdin closed, stdout and
stderr appended to its log.

A pid file names a process only while that process is alive and its command line holds the
marker it was started with (a recycled pid after a reboot is not taken for it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

_LAUNCH = """\
import subprocess, sys
from pathlib import Path
child = subprocess.Popen(sys.argv[2:], start_new_session=True)
Path(sys.argv[1]).write_text(f"{child.pid}\\n")
"""


def launch(command: list[str], cwd: Path, env: dict[str, str], log: Path, pid_file: Path) -> int:
    """Start ``command`` detached; its pid (also written to ``pid_file``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file.unlink(missing_ok=True)
    try:
        with log.open("ab") as out:
            subprocess.run(
                [sys.executable, "-c", _LAUNCH, str(pid_file), *command], cwd=cwd, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=True,
                timeout=120,
            )  # fmt: skip
        return int(pid_file.read_text().strip())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise GymflowError(
            FailureKind.INTERNAL_ERROR,
            f"could not start {Path(command[0]).name}: {exc}: {log_tail(log)}",
        ) from None


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def is_alive(pid: int | None, marker: bytes) -> bool:
    """``pid`` is alive (not a zombie) and its command line holds ``marker``.

    A process in the middle of ``exec`` (slow under disk load) shows an empty command line for
    a while: that counts, its state says it is alive.
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
    return not cmdline or marker in cmdline


def terminate(pid: int, marker: bytes, grace_s: float, group: bool = False) -> str:
    """SIGTERM ``pid`` (with ``group``: every process of its session, which it leads), then
    SIGKILL its whole session after ``grace_s``; what happened. ``group`` is for servers
    that leave helper processes behind when only their main process is told to stop."""
    if group:
        os.killpg(pid, signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while is_alive(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    if is_alive(pid, marker):
        os.killpg(pid, signal.SIGKILL)  # its session: the servers it started too
        return f"pid {pid} killed after {grace_s:.0f} s"
    if group:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # helpers that outlived it
    return f"pid {pid} stopped"


def log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
