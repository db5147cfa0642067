"""``gymflow env serve NAME --ray N``: an environment's resources server as N Ray actor replicas.

The same HTTP API and ``/health`` as ``--workers N`` (:mod:`gymflow.env.serve`), with the
processes placed by Ray: replica ``k`` (:class:`EnvReplica`) runs the server under uvicorn on
port ``port + k`` of the node Ray put it on, every replica's ``/health`` lists all N URLs, and
:class:`~gymflow.env.client.EnvClient` spreads new sessions over them and sends each later call
of a session to the replica that holds it (the session id names it), as it does for workers.
Actors with their own ports rather than a Ray Serve deployment: Serve's HTTP proxy routes each
request on its own, and a session's calls must reach the process that holds its state.

A replica whose process dies (killed, out of memory) is restarted by Ray, on the same port
(tried again for up to :data:`REBIND_WAIT_S` while another connection holds it), up to
``max_restarts`` times: its sessions are gone (their next calls fail with
``env_unavailable`` or ``unknown_session``, rows without a reward that ``rollouts collect
--retry-failed`` runs again), new sessions go to it again. URLs name the host given (or, bound
to every interface, each replica's node address); on a cluster of several nodes bind
``0.0.0.0`` with a token. Without ``address`` a local cluster is started and stopped here
(:mod:`gymflow.core.ray_cluster`).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.ray_cluster import ray_cluster, require_ray
from gymflow.env.serve import check_bind, describe_tasks, preflight, stop_requested, worker_app
from gymflow.env.task_store import TaskStore

WILDCARD = {"0.0.0.0", "::"}
RESTART_WAIT_S = 300.0
"""How long a dead replica's restart may take before the server gives up on it."""
REBIND_WAIT_S = 90.0
"""How long a restarted replica tries its port again before it gives up (see :meth:`serve`)."""


class EnvReplica:
    """One replica (run as a Ray actor): the environment's server on a port of its node."""

    def __init__(
        self, name: str, host: str, token: str | None, client_ids: bool, tasks: TaskStore
    ) -> None:
        self.name, self.host, self.token, self.client_ids = name, host, token, client_ids
        self.tasks = tasks

    def node_ip(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def pid(self) -> int:
        return os.getpid()

    async def serve(self, port: int, index: int, urls: list[str], bind_wait_s: float = 0.0) -> None:
        """Serve until the actor is killed; a port in use is tried again for ``bind_wait_s``.

        Why again: between a replica's death and its restart, any connection from this host can
        be given the freed port as its local (ephemeral) port, and the kernel then refuses the
        bind until that connection and its TIME_WAIT (60 s) are over. On the first start a port
        in use is the user's to fix, so it fails at once."""
        import uvicorn

        app = worker_app(self.name, self.token, index, urls, self.client_ids, tasks=self.tasks)
        deadline = time.monotonic() + bind_wait_s
        while True:
            config = uvicorn.Config(
                app, host=self.host, port=port, log_level="warning", access_log=False
            )
            try:
                await uvicorn.Server(config).serve()
                return
            except SystemExit:  # uvicorn exits when it cannot bind
                if time.monotonic() >= deadline:
                    raise GymflowError(
                        FailureKind.ENV_UNAVAILABLE,
                        f"replica {index} could not serve on {self.host}:{port} (port in use?)",
                    ) from None
                await asyncio.sleep(1.0)


def serve_on_ray(
    name: str,
    host: str,
    port: int,
    replicas: int,
    token: str | None = None,
    insecure: bool = False,
    client_session_ids: bool = False,
    address: str | None = None,
    max_restarts: int = 3,
    tasks: TaskStore | None = None,
) -> int:
    """Serve ``name`` as ``replicas`` Ray actors until interrupted, scoring against ``tasks``
    (none: every seed is refused, see :mod:`gymflow.env.task_store`); returns an exit status."""
    if replicas < 1:
        raise GymflowError(FailureKind.BAD_REQUEST, f"--ray must be >= 1, got {replicas}")
    check_bind(name, host, token, insecure)
    preflight(name)
    tasks = tasks if tasks is not None else TaskStore()
    ray = require_ray()
    with ray_cluster(address, num_cpus=max(replicas, os.cpu_count() or 1)) as cluster:
        actor = ray.remote(EnvReplica).options(max_restarts=max_restarts, num_cpus=1)
        actors = [
            actor.remote(name, host, token, client_session_ids, tasks) for _ in range(replicas)
        ]
        ips = ray.get([a.node_ip.remote() for a in actors])
        urls = [f"http://{ip if host in WILDCARD else host}:{port + k}" for k, ip in enumerate(ips)]
        running = {actors[k].serve.remote(port + k, k, urls): k for k in range(replicas)}
        where = f"cluster {cluster.address}" if not cluster.local else "a local cluster"
        print(
            f"serving {name} on {', '.join(urls)} ({replicas} Ray replicas on {where}, "
            f"up in {cluster.start_s} s; {describe_tasks(tasks)})",
            file=sys.stderr,
            flush=True,
        )
        return _watch(ray, actors, running, port, urls, max_restarts)


def _watch(ray, actors: list, running: dict, port: int, urls: list[str], max_restarts: int) -> int:
    """Serve again on every replica Ray restarted, until a signal or one fails for good."""
    stopping = stop_requested()
    restarts = [0] * len(actors)
    try:
        while not stopping():
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
            for ref in done:
                k = running.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError:
                    restarts[k] += 1
                    if restarts[k] > max_restarts:
                        print(f"replica {k} died {restarts[k]} times; stopping", file=sys.stderr)
                        return 1
                    print(
                        f"replica {k} died; serving {urls[k]} again from its restarted process "
                        "(its sessions are gone)",
                        file=sys.stderr,
                        flush=True,
                    )
                    if not _restarted(ray, actors[k], stopping):
                        if stopping():
                            return 0
                        print(f"replica {k} was not restarted; stopping", file=sys.stderr)
                        return 1
                    running[actors[k].serve.remote(port + k, k, urls, REBIND_WAIT_S)] = k
                except ray.exceptions.RayTaskError as exc:  # it could not serve
                    print(f"error: {getattr(exc.cause, 'detail', exc.cause)}", file=sys.stderr)
                    return 2
        return 0
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)


def _restarted(ray, actor, stopping, wait_s: float = RESTART_WAIT_S) -> bool:
    """Whether Ray brought ``actor`` back (it answers a call) within ``wait_s``.

    Why wait: a call to an actor Ray is still restarting fails at once with
    ``ActorUnavailableError``, a ``RayActorError`` like a death; serving again straight away
    counted each of those as another death, and where a restart takes several seconds (a slow
    machine) one kill used up every ``max_restarts`` and stopped the server.
    """
    deadline = time.monotonic() + wait_s
    while not stopping() and time.monotonic() < deadline:
        try:
            ray.get(actor.pid.remote(), timeout=5)
            return True
        except ray.exceptions.ActorUnavailableError:
            time.sleep(0.2)
        except ray.exceptions.GetTimeoutError:
            continue
        except ray.exceptions.RayActorError:  # dead for good: Ray's restarts are used up
            return False
    return False
