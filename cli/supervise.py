"""Ctrl-C that stops a run within seconds: the run works in a child process of its own session.

A terminal's Ctrl-C sends SIGINT to its whole foreground process group: the command, Prefect's
temporary API server, the SFT control's process, verifier pools. Each then dies on its own,
and the command sat for minutes in Prefect's HTTP retries, reporting "Crashed" to the server
the same Ctrl-C had stopped, with tracebacks on stderr. So ``gymflow run`` and ``gymflow
rerun`` start the same command again as a child in a new session (no terminal signal reaches
it) and relay the interrupt themselves:

* first Ctrl-C: one line; SIGINT to the child alone, whose run stops where it is (its Prefect
  server still up, so the flow run is marked Crashed there) and which exits 130 without a
  traceback; after ``grace_s`` whatever is left of the child's session is killed;
* second Ctrl-C: the child's session is killed at once;
* either way: every process of the child's session is gone before the command exits 130 with
  one line naming ``gymflow rerun RUN_ID``.

The child inherits the command's standard streams, so progress bars and lines look as they
would in one process. Where those streams are not real files (a test's ``CliRunner``), or in
the child itself (``GYMFLOW_SUPERVISED`` set), the command runs in-process as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from gymflow.core.watchdog import descendants, signal_all

SUPERVISED = "GYMFLOW_SUPERVISED"
"""Set in the child: it runs the command itself."""
EXIT_INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""


def can_supervise() -> bool:
    """Not in the child already, and the standard streams are real files a child can share."""
    if os.environ.get(SUPERVISED):
        return False
    try:
        sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def run_supervised(args: list[str], run_id: str, grace_s: float = 10.0) -> int:
    """Run ``gymflow ARGS`` as a child in its own session; its exit code, or 130 when
    interrupted (after the line that says how to resume)."""
    from gymflow.core.watchdog import start_watchdog

    start_watchdog()  # this command SIGKILLed: the child's session goes with it
    sys.stdout.flush()
    child = subprocess.Popen(
        [sys.executable, "-m", "gymflow.cli.main", *args],
        env=os.environ | {SUPERVISED: "1"},
        start_new_session=True,
    )
    interrupts: list[float] = []
    recorded: dict[int, int] = {}  # the child's descendants, to stop those that left its group

    def on_interrupt(signum, frame) -> None:
        interrupts.append(time.monotonic())
        if len(interrupts) == 1:
            _say(f"interrupted: stopping run {run_id} (Ctrl-C again to stop at once)")
            _signal(child.pid, signal.SIGINT)
        else:
            _kill_session(child.pid)

    previous = {sig: signal.signal(sig, on_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while child.poll() is None:
            recorded.update(descendants(child.pid))
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1.0)
            if interrupts and time.monotonic() - interrupts[0] > grace_s:
                _kill_session(child.pid)
    finally:
        # what the child left: its Prefect server, pools, trainers (its watchdog, in a session
        # of its own, ends by itself once the child is gone)
        _kill_session(child.pid)
        signal_all(recorded, signal.SIGKILL)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if interrupts:
        _say(f"[interrupted] run {run_id} stopped; resume it with: gymflow rerun {run_id}")
        return EXIT_INTERRUPTED
    return child.returncode


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _kill_session(pid: int) -> None:
    """SIGKILL to every process of the child's session (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
