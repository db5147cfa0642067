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

Ground truth is the server's own (:mod:`gymflow.env.task_store`): the tasks it was started
with (``--tasks FILE``), seeded by ``task_id``; tasks clients send are refused unless
``--trust-client-tasks``. An environment with a ``preflight()`` (``code``: is there a sandbox?)
is asked before anything is served, so a host that cannot run it fails in one line.

Heavy verifiers (``heavy_verify``) run in a process pool of each worker, or with
``VerifyOn("ray")`` on Ray actors (:mod:`gymflow.env.ray_verify`): on the cluster at its
address, or on a local one started here before the workers and stopped after them (workers in
other processes join it by its address).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.task_store import TaskStore

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class VerifyOn:
    """Where a server's heavy verifiers run."""

    on: str = "local"
    """``local`` (a process pool in each worker) or ``ray`` (Ray actors)."""
    workers: int | None = None
    """Processes or actors per server worker (default: the machine's cores, at most 4)."""
    ray_address: str | None = None
    """With ``ray``: a running cluster (default: a local one started by :func:`serve`)."""
    ray_environment: dict[str, str] = field(default_factory=dict)
    """What a worker process sets before it joins the cluster (a local one: loopback only)."""

    def __post_init__(self) -> None:
        if self.on not in ("local", "ray"):
            raise GymflowError(
                FailureKind.BAD_REQUEST, f"--verify-on is 'local' or 'ray', not {self.on!r}"
            )


def worker_urls(host: str, port: int, workers: int) -> list[str]:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return [f"http://{shown}:{port + k}" for k in range(workers)]


def check_bind(
    name: str,
    host: str,
    token: str | None,
    insecure: bool,
    token_flag: str = "--token (or GYMFLOW_ENV_TOKEN)",
    exposed: str = "call its tools",
) -> None:
    """Refuse a non-loopback bind without a token unless ``insecure`` (then warn).

    ``token_flag`` names how the command takes a token, ``exposed`` what anyone could do."""
    if host in LOOPBACK or token:
        return
    if not insecure:
        raise GymflowError(
            FailureKind.UNAUTHORIZED,
            f"refusing to serve {name} on {host} without a bearer token: anyone who can "
            f"reach the port could {exposed}; set {token_flag}, bind 127.0.0.1, or pass "
            "--insecure to accept that",
        )
    print(f"warning: serving {name} on {host} without a bearer token (--insecure)", file=sys.stderr)


def preflight(name: str) -> None:
    """Raise if environment ``name`` cannot run on this host (its ``preflight()``, if any)."""
    from gymflow.env.registry import get_env

    check = getattr(get_env(name), "preflight", None)
    if callable(check):
        check()


def describe_tasks(tasks: TaskStore) -> str:
    """What a starting server says about its ground truth."""
    if tasks.trust_client_tasks:
        return f"{len(tasks)} tasks loaded; tasks clients send are scored as sent"
    return f"{len(tasks)} tasks loaded; tasks clients send are refused unless they are these"


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
    verify: VerifyOn = VerifyOn(),
    tasks: TaskStore | None = None,
) -> None:
    import uvicorn

    app = worker_app(name, token, index, urls, client_session_ids, verify, tasks)
    with contextlib.ExitStack() as stack:
        if verify.on == "ray":  # joined here, before uvicorn takes SIGTERM (Ray would keep it)
            from gymflow.core.ray_cluster import ray_cluster

            os.environ.update(verify.ray_environment)
            stack.enter_context(ray_cluster(verify.ray_address))
        uvicorn.run(app, host=host, port=port + index, log_level="warning", access_log=False)


def worker_app(
    name: str,
    token: str | None,
    index: int,
    urls: list[str],
    client_session_ids: bool = False,
    verify: VerifyOn = VerifyOn(),
    tasks: TaskStore | None = None,
):
    """The resources server of worker ``index`` of the workers at ``urls`` (one: no worker
    info, sessions unprefixed), scoring against ``tasks`` (none: every seed is refused)."""
    from gymflow.env.registry import get_env
    from gymflow.env.resources_server import WorkerInfo, build_app

    worker = WorkerInfo(index, tuple(urls)) if len(urls) > 1 else None
    return build_app(
        get_env(name),
        token=token,
        worker=worker,
        client_session_ids=client_session_ids,
        verify_workers=verify.workers,
        verify_on=verify.on,
        ray_address=verify.ray_address,
        tasks=tasks if tasks is not None else TaskStore(),
    )


@contextlib.contextmanager
def verify_cluster(name: str, workers: int, verify: VerifyOn) -> Iterator[VerifyOn]:
    """The Ray cluster ``verify`` names, joined (or a local one started) for the block: what
    the workers are given then names it. Nothing for local verification or a light verifier."""
    from gymflow.env.registry import get_env
    from gymflow.env.verify_pool import default_workers

    if verify.on != "ray":
        yield verify
        return
    if not getattr(get_env(name), "heavy_verify", False):
        print(
            f"{name} verifies inline (light verifier): --verify-on ray changes nothing",
            file=sys.stderr,
        )
        yield replace(verify, on="local")
        return
    from gymflow.core.ray_cluster import join_environment, ray_cluster

    actors = workers * (verify.workers or default_workers())
    with ray_cluster(verify.ray_address, num_cpus=max(actors, os.cpu_count() or 1)) as cluster:
        where = cluster.address if not cluster.local else f"a local cluster ({cluster.start_s} s)"
        print(f"verifying {name} on {actors} Ray actors on {where}", file=sys.stderr, flush=True)
        if workers == 1:  # served from this process, already connected
            yield verify
        else:
            yield replace(
                verify, ray_address=cluster.address, ray_environment=join_environment(cluster)
            )


def serve(
    name: str,
    host: str,
    port: int,
    workers: int = 1,
    token: str | None = None,
    insecure: bool = False,
    client_session_ids: bool = False,
    verify: VerifyOn = VerifyOn(),
    tasks: TaskStore | None = None,
) -> int:
    """Serve ``name`` until interrupted, scoring against ``tasks``; returns an exit status."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    check_bind(name, host, token, insecure)
    preflight(name)
    tasks = tasks if tasks is not None else TaskStore()
    with verify_cluster(name, workers, verify) as verify:
        return _serve_workers(name, host, port, workers, token, client_session_ids, verify, tasks)


def _serve_workers(
    name: str,
    host: str,
    port: int,
    workers: int,
    token: str | None,
    client_session_ids: bool,
    verify: VerifyOn,
    tasks: TaskStore,
) -> int:
    urls = worker_urls(host, port, workers)
    print(
        f"serving {name} on {', '.join(urls)} ({describe_tasks(tasks)})",
        file=sys.stderr,
        flush=True,
    )
    if workers == 1:
        _run_worker(name, host, port, token, 0, urls, client_session_ids, verify, tasks)
        return 0
    return supervise(
        _run_worker,
        [
            (name, host, port, token, k, urls, client_session_ids, verify, tasks)
            for k in range(workers)
        ],
    )


def supervise(target: Callable[..., None], worker_args: list[tuple]) -> int:
    """Run ``target(*args)`` in a spawned process per entry of ``worker_args`` until SIGTERM or
    SIGINT, or until one exits (then the others are stopped: exit status 1)."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args, daemon=True) for args in worker_args]
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
