"""``gymflow env serve``: an environment's resources server over HTTP, in one or more processes.

One worker is one uvicorn process. ``workers=N`` starts N processes on ports ``port`` …
``port+N-1``; sessions live in the process that seeded them, each worker's ``/health`` lists
all N URLs, and :class:`~gymflow.env.client.EnvClient` spreads new sessions over them and sends
every later call of a session to its worker (the session id names it). Why not one shared port
with N uvicorn workers: the kernel hands connections to workers at random, so a session's
second call would land on a process that does not hold it.

Binds loopback by default. Bound elsewhere it needs a bearer token (``--token`` or
``GYMFLOW_ENV_TOKEN``) and refuses to start without one, unless ``--insecure`` says that anyone
who can reach the port may call its tools.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from collections.abc import Callable

from gymflow.core.failures import FailureKind, GymflowError

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def worker_urls(host: str, port: int, workers: int) -> list[str]:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return [f"http://{shown}:{port + k}" for k in range(workers)]


def check_bind(name: str, host: str, token: str | None, insecure: bool) -> None:
    """Refuse a non-loopback bind without a token unless ``insecure`` (then warn)."""
    if host in LOOPBACK or token:
        return
    if not insecure:
        raise GymflowError(
            FailureKind.UNAUTHORIZED,
            f"refusing to serve {name} on {host} without a bearer token: anyone who can "
            "reach the port could call its tools; set --token (or GYMFLOW_ENV_TOKEN), bind "
            "127.0.0.1, or pass --insecure to accept that",
        )
    print(f"warning: serving {name} on {host} without a bearer token (--insecure)", file=sys.stderr)


def stop_requested() -> Callable[[], bool]:
    """Catch SIGTERM and SIGINT from now on; the function returned says whether one came."""
    caught: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        caught.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return lambda: bool(caught)


def _run_worker(
    name: str,
    host: str,
    port: int,
    token: str | None,
    index: int,
    urls: list[str],
    client_session_ids: bool = False,
) -> None:
    import uvicorn

    app = worker_app(name, token, index, urls, client_session_ids)
    uvicorn.run(app, host=host, port=port + index, log_level="warning", access_log=False)


def worker_app(
    name: str, token: str | None, index: int, urls: list[str], client_session_ids: bool = False
):
    """The resources server of worker ``index`` of the workers at ``urls`` (one: no worker
    info, sessions unprefixed)."""
    from gymflow.env.registry import get_env
    from gymflow.env.resources_server import WorkerInfo, build_app

    worker = WorkerInfo(index, tuple(urls)) if len(urls) > 1 else None
    return build_app(
        get_env(name), token=token, worker=worker, client_session_ids=client_session_ids
    )


def serve(
    name: str,
    host: str,
    port: int,
    workers: int = 1,
    token: str | None = None,
    insecure: bool = False,
    client_session_ids: bool = False,
) -> int:
    """Serve ``name`` until interrupted; returns an exit status."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    check_bind(name, host, token, insecure)
    urls = worker_urls(host, port, workers)
    print(f"serving {name} on {', '.join(urls)}", file=sys.stderr, flush=True)
    if workers == 1:
        _run_worker(name, host, port, token, 0, urls, client_session_ids)
        return 0
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_run_worker,
            args=(name, host, port, token, k, urls, client_session_ids),
            daemon=True,
        )
        for k in range(workers)
    ]
    for proc in procs:
        proc.start()
    stopping = stop_requested()
    try:
        while not stopping() and all(p.is_alive() for p in procs):
            time.sleep(0.2)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(5)
    dead = [k for k, p in enumerate(procs) if p.exitcode not in (0, -signal.SIGTERM, None)]
    if dead and not stopping():
        print(f"worker(s) {dead} exited; stopped the others", file=sys.stderr)
        return 1
    return 0
