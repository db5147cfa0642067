"""The supervised child's side of Ctrl-C (:mod:`gymflow.cli.supervise`): stop without noise.

On SIGINT the child's logs go quiet (Prefect's engine still marks the flow run Crashed on its
server, which the interrupt did not reach; it just does not print the traceback), the progress
trackers stop, the processes the run started to work (the SFT control beside GRPO, trainers,
verifier pools) are killed — the flow would otherwise wait for the control's step and
checkpoint before it ends — and the main thread gets ``KeyboardInterrupt`` where it is. The
temporary Prefect API server and the watchdog are kept: the first records the Crashed state,
the second ends by itself, and multiprocessing's resource tracker, killed, would be started
again and print a traceback for every name it then does not know. The command then
ends its MLflow runs as killed and leaves at once with exit code 130: the supervisor has said
what happened and stops whatever the child started.
"""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from gymflow.cli.supervise import EXIT_INTERRUPTED, SUPERVISED


def stop_quietly_on_interrupt() -> None:
    """In the child: SIGINT silences logging and progress, then interrupts the main thread."""
    if os.environ.get(SUPERVISED):
        signal.signal(signal.SIGINT, _quiet_interrupt)


KEEP = ("prefect.server.api.server", "gymflow.core.watchdog", "multiprocessing.resource_tracker")
"""Descendants an interrupt leaves running (by a piece of their command line)."""


_interrupted: list[float] = []


def _quiet_interrupt(signum, frame) -> None:
    if not _interrupted:
        _interrupted.append(time.monotonic())
        logging.disable(logging.CRITICAL)
        sys.unraisablehook = lambda unraisable: None  # "Exception ignored in ..." lines
        from gymflow.core import progress

        progress.silence()
        _stop_workers()
        # An interrupt that lands in a finalizer (``__del__``) is swallowed there: raise it
        # again until the main thread takes it (the supervisor kills what is left after its
        # grace period in any case).
        threading.Thread(target=_interrupt_again, daemon=True).start()
    raise KeyboardInterrupt


def _interrupt_again(every_s: float = 2.0) -> None:
    while True:
        time.sleep(every_s)
        _thread.interrupt_main()


def _stop_workers() -> None:
    from gymflow.core.watchdog import descendants, signal_all

    work = {}
    for pid, start in descendants(os.getpid()).items():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue  # gone already
        if not any(keep in command for keep in KEEP):
            work[pid] = start
    signal_all(work, signal.SIGKILL)


def end_interrupted() -> None:
    """Mark the open MLflow runs killed and exit 130 without running exit handlers (their
    waits on servers and queues are what a user pressing Ctrl-C does not want)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # no interrupt of the last words
    try:
        import mlflow

        while mlflow.active_run() is not None:
            mlflow.end_run("KILLED")
    except Exception:  # noqa: BLE001 - the tracking store may be what the interrupt broke
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)
