"""Serve deployments until Ctrl-C or SIGTERM, and always exit.

Prefect's runner (what ``prefect.serve`` starts) picks up the deployments' scheduled runs and
runs them. Two things differ from ``prefect.serve``:

* the schedules stay active when this process stops (``pause_on_shutdown=False``): runs due
  meanwhile wait in the Prefect server (``Late``) and a later ``gymflow deploy`` runs them,
  instead of a schedule that silently stopped with the terminal that served it;
* a stop never hangs. ``prefect.serve`` paused every deployment on the way out through the
  API, and with the server gone its client retried forever ("Pausing all deployments…"). Here
  the first Ctrl-C or SIGTERM starts a clock: if the runner has not stopped within
  ``grace_s`` (a server that does not answer), the process says so and exits; a second signal
  exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading

from gymflow.core.failures import FailureKind

GRACE_S = 15.0


def serve_until_stopped(deployments: list, api_url: str, grace_s: float = GRACE_S) -> int:
    """Run Prefect's runner on ``deployments``; the exit code once stopped (0: by a signal)."""
    from prefect.runner import Runner

    runner = Runner(pause_on_shutdown=False)
    stopping = threading.Event()

    def force_exit(code: int, why: str) -> None:
        sys.stderr.write(f"error: [{FailureKind.TIMEOUT}] {why}; exiting now\n")
        sys.stderr.flush()
        os._exit(code)

    def begin_stop(what: str) -> None:
        if stopping.is_set():
            force_exit(1, f"{what} again while stopping")
        stopping.set()
        print(f"stopping ({what}); the schedules stay active in {api_url}", flush=True)
        why = f"the runner did not stop within {grace_s:.0f} s (is the Prefect server gone?)"
        timer = threading.Timer(grace_s, force_exit, (1, why))
        timer.daemon = True
        timer.start()

    def on_sigterm(*args) -> None:  # also what the runner installs as its SIGTERM handler
        begin_stop("SIGTERM")
        sys.exit(0)  # unwinds asyncio.run: the runner leaves its context, its runs are ended

    def on_sigint(signum, frame) -> None:
        begin_stop("Ctrl-C")
        raise KeyboardInterrupt

    runner.handle_sigterm = on_sigterm
    signal.signal(signal.SIGTERM, on_sigterm)  # from now: registering takes a while
    signal.signal(signal.SIGINT, on_sigint)
    with contextlib.suppress(KeyboardInterrupt, SystemExit):  # how a stop ends the runner
        for deployment in deployments:
            runner.add_deployment(deployment)  # registers it with the server
        print(f"{len(deployments)} deployments registered; running their flow runs", flush=True)
        asyncio.run(runner.start())
    return 0
