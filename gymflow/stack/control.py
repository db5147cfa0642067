"""``gymflow stack up|status|down``: the stack's processes started, reported and stopped.

Everything lives in the stack folder (``<home>/.stack`` unless the settings say otherwise):
``artifacts/`` (MLflow's artifact store), ``results/`` (Prefect's stage results and cache
records), ``prefect/`` (the Prefect server's home), ``run/<name>.pid`` and ``logs/<name>.log``
of each process. PostgreSQL's cluster is :mod:`gymflow.stack.postgres`'s. ``up`` is
idempotent: what runs already is left alone, what does not is started, in dependency order
(PostgreSQL, the two servers, then the pool and its limit, then the workers).
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gymflow.core import detached
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.stack import postgres
from gymflow.stack.servers import AUTH_DATABASE, Server, mlflow_server, prefect_server, worker
from gymflow.stack.settings import StackSettings


@dataclass(frozen=True)
class Stack:
    home: Path
    settings: StackSettings

    @property
    def root(self) -> Path:
        return self.settings.root(self.home)

    @property
    def pg(self) -> postgres.Postgres:
        return postgres.cluster(self.root, self.settings.postgres_port)

    def servers(self) -> list[Server]:
        """The two servers, then the workers (the start order; stopped in reverse)."""
        s, root, pg = self.settings, self.root, self.pg
        workers = [worker(s, root, self.home, n) for n in range(1, s.workers + 1)]
        return [prefect_server(s, root, pg), mlflow_server(s, root, pg), *workers]

    def pid_file(self, name: str) -> Path:
        return self.root / "run" / f"{name}.pid"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def alive(self, server: Server) -> int | None:
        pid = detached.read_pid(self.pid_file(server.name))
        return pid if detached.is_alive(pid, server.marker) else None


def up(stack: Stack, timeout_s: float = 300.0) -> list[str]:
    """Start what is not running; one line per part. ``timeout`` naming the part (and its
    log's tail) that did not answer in time."""
    root, pg, said = stack.root, stack.pg, []
    for sub in ("artifacts", "logs", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    stack.settings.results_path(stack.home).mkdir(parents=True, exist_ok=True)
    postgres.ensure_cluster(pg)
    if postgres.running(pg):
        said.append(f"postgres: running on 127.0.0.1:{pg.port}")
    else:
        postgres.start(pg)
        said.append(f"postgres: started on 127.0.0.1:{pg.port} (log {pg.log})")
    extra = (AUTH_DATABASE,) if stack.settings.mlflow_login else ()
    postgres.ensure_databases(pg, postgres.DATABASES + extra)
    servers = stack.servers()
    for server in servers[:2]:
        said.append(_start(stack, server))
    for server in servers[:2]:
        wait_healthy(stack, server, timeout_s)
    from gymflow.stack.pool import ensure_pool

    with _prefect_client(stack.settings):
        said += ensure_pool(stack.settings.pool, stack.settings.train_limit)
    for server in servers[2:]:
        said.append(_start(stack, server))
    return said


def status(stack: Stack) -> tuple[list[str], bool]:
    """One line per part and whether all of them run and answer."""
    pg = stack.pg
    ok = postgres.running(pg)
    lines = [f"postgres: {'running' if ok else 'not running'} on 127.0.0.1:{pg.port} "
             f"(cluster {pg.data})"]  # fmt: skip
    for server in stack.servers():
        pid = stack.alive(server)
        answers = server.health is None or _answers(server.health)
        state = (
            "not running" if pid is None else f"pid {pid}" + ("" if answers else ", not answering")
        )
        where = f" at {server.health.rsplit('/', 1)[0]}" if server.health else ""
        lines.append(f"{server.name}: {state}{where} (log {stack.log(server.name)})")
        ok = ok and pid is not None and answers
    return lines, ok


def down(stack: Stack, grace_s: float = 30.0) -> list[str]:
    """Stop the workers, the servers, then PostgreSQL; one line per part."""
    said = []
    for server in reversed(stack.servers()):
        pid = stack.alive(server)
        if pid is not None:
            stopped = detached.terminate(pid, server.marker, grace_s, group=True)
            said.append(f"{server.name}: {stopped}")
        stack.pid_file(server.name).unlink(missing_ok=True)
    if postgres.running(stack.pg):
        postgres.stop(stack.pg)
        said.append("postgres: stopped")
    return said or ["nothing was running"]


def start_server(stack: Stack, name: str) -> str:
    """Start one part by name (after a fault, or a drill): ``mlflow``, ``prefect``,
    ``worker-N``."""
    server = next(s for s in stack.servers() if s.name == name)
    said = _start(stack, server)
    if server.health:
        wait_healthy(stack, server, 300.0)
    return said


def _start(stack: Stack, server: Server) -> str:
    pid = stack.alive(server)
    if pid is not None:
        return f"{server.name}: running (pid {pid})"
    log = stack.log(server.name)
    pid = detached.launch(server.command, stack.root, server.env, log, stack.pid_file(server.name))
    return f"{server.name}: started, pid {pid} (log {log})"


def wait_healthy(stack: Stack, server: Server, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _answers(server.health):
        if stack.alive(server) is None:
            raise GymflowError(
                FailureKind.INTERNAL_ERROR,
                f"the {server.name} server exited while starting: "
                f"{detached.log_tail(stack.log(server.name))}",
            )
        if time.monotonic() > deadline:
            raise GymflowError(
                FailureKind.TIMEOUT,
                f"the {server.name} server did not answer {server.health} within "
                f"{timeout_s:.0f} s (log {stack.log(server.name)})",
            )
        time.sleep(0.5)


def _answers(url: str | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _prefect_client(settings: StackSettings):
    """Prefect's client pointed at the stack's server (with its auth string, if any)."""
    import os

    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    values = {PREFECT_API_URL: settings.prefect_api}
    if "PREFECT_SERVER_API_AUTH_STRING" in os.environ:
        values[PREFECT_API_AUTH_STRING] = os.environ["PREFECT_SERVER_API_AUTH_STRING"]
    return temporary_settings(values)
