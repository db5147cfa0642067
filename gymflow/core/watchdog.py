"""A parent watchdog: when a process dies — even by SIGKILL, which runs no cleanup — the
processes it started die too.

``gymflow run`` starts children it does not fully control: Prefect's temporary API server (a
uvicorn subprocess Prefect launches), the spawned SFT-control worker, verifier pools and
multiprocessing's resource tracker. Killed outright, it would leave them running, holding the
project's Prefect database and CPU. :func:`start_watchdog` launches a small separate process
(its own session, so the signal that killed the parent's group does not reach it first) that
every ``interval_s`` records the parent's descendants from ``/proc``; once the parent is gone
it sends SIGTERM to every recorded process still alive (same pid *and* start time, so a reused
pid is never hit), then SIGKILL to those that are left after ``grace_s``, and exits.

Linux only (``/proc``); elsewhere :func:`start_watchdog` does nothing and says so in its
return value. ``PR_SET_PDEATHSIG`` would cover only children that set it themselves, which
Prefect's server does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROC = Path("/proc")
_started: dict[int, subprocess.Popen] = {}
"""The watchdog of this process, by pid (a forked child watches itself anew)."""


def start_watchdog(interval_s: float = 0.5, grace_s: float = 3.0) -> subprocess.Popen | None:
    """Watch this process (once: later calls return the same watchdog); ``None`` where
    ``/proc`` is missing (not Linux)."""
    me = os.getpid()
    if me in _started and _started[me].poll() is None:
        return _started[me]
    if not (PROC / str(me) / "stat").exists():
        return None
    _started[me] = subprocess.Popen(
        [sys.executable, "-m", "gymflow.core.watchdog", str(os.getpid()), str(interval_s),
         str(grace_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )  # fmt: skip
    return _started[me]


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of ``root`` as ``{pid: start time}`` (from ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            ppid, start = stat
            children.setdefault(ppid, []).append(int(entry.name))
            started[int(entry.name)] = start
    found: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found and pid in started:
            found[pid] = started[pid]
            todo += children.get(pid, [])
    return found


def watch(parent: int, interval_s: float, grace_s: float) -> None:
    me = os.getpid()
    parent_stat = _stat(parent)
    if parent_stat is None:
        return
    recorded: dict[int, int] = {}
    while _stat(parent) == parent_stat:
        recorded.update(descendants(parent))
        recorded.pop(me, None)
        recorded = {pid: start for pid, start in recorded.items() if _alive(pid, start)}
        time.sleep(interval_s)
    signal_all(recorded, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in recorded.items()):
        time.sleep(0.1)
    signal_all(recorded, signal.SIGKILL)


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time in clock ticks)`` of ``pid``, or None if it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    if fields[0] == "Z":  # a zombie has exited already
        return None
    return int(fields[1]), int(fields[19])


def _alive(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == start


def signal_all(recorded: dict[int, int], sig: signal.Signals) -> None:
    """Send ``sig`` to each recorded ``{pid: start time}`` that is still that process."""
    for pid, start in recorded.items():
        if _alive(pid, start):
            with contextlib.suppress(OSError):  # it exited between the check and the signal
                os.kill(pid, sig)


if __name__ == "__main__":
    watch(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))
