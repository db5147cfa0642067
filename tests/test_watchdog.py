"""The parent watchdog: a process SIGKILLed leaves no children behind (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from gymflow.core.watchdog import _alive, _stat, descendants

PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from gymflow.core.watchdog import start_watchdog
    start_watchdog(interval_s=0.1, grace_s=1.0)
    # a child, and a child with a child of its own, like Prefect's server and a spawned worker
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(300)']); time.sleep(300)"])
    print("ready", flush=True)
    time.sleep(300)
    """
)


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_children_and_grandchildren_die_with_a_killed_parent():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout.readline().strip() == "ready"
        assert _wait(lambda: len(descendants(parent.pid)) >= 4, 10)  # 3 sleepers + the watchdog
        time.sleep(0.3)  # the watchdog has recorded them
        doomed = {pid: _stat(pid)[1] for pid in descendants(parent.pid)}
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert _wait(lambda: not any(_alive(p, s) for p, s in doomed.items()), 15), [
            p for p, s in doomed.items() if _alive(p, s)
        ]
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_living_parent_keeps_its_children():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout.readline().strip() == "ready"
        assert _wait(lambda: len(descendants(parent.pid)) >= 4, 10)
        time.sleep(1.0)
        assert len(descendants(parent.pid)) >= 4  # nothing was killed while the parent lives
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(10)
