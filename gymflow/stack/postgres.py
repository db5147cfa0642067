"""The stack's PostgreSQL: one cluster holding the MLflow and Prefect databases.

Debian's ``postgresql`` package (binaries under ``/usr/lib/postgresql/<major>/bin``).
``initdb`` and the server refuse to run as root, so as root they run as the ``postgres`` user
(``runuser``) with the cluster in a folder it owns under its home; otherwise as the current
user inside the stack folder. The cluster listens on loopback only and trusts local logins of
its one role, ``gymflow`` (no password to keep): the servers on the same box are its only
clients. ``pg_ctl`` starts, stops and reports it (its own pid file, in the cluster folder).
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

ROLE = "gymflow"
DATABASES = ("mlflow", "prefect")


@dataclass(frozen=True)
class Postgres:
    data: Path
    """The cluster's folder (``PG_VERSION``, ``postmaster.pid``, ``server.log``)."""
    port: int

    @property
    def log(self) -> Path:
        return self.data / "server.log"

    def url(self, database: str, driver: str = "postgresql") -> str:
        return f"{driver}://{ROLE}@127.0.0.1:{self.port}/{database}"


def cluster(root: Path, port: int) -> Postgres:
    """The cluster of the stack at ``root`` (as root: under the postgres user's home)."""
    if os.geteuid() != 0:
        return Postgres(root / "postgres", port)
    owner_home = Path(pwd.getpwnam("postgres").pw_dir)
    key = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return Postgres(owner_home / "gymflow" / key, port)


def bin_dir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are; ``backend_unavailable`` naming the package."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_major)
    if versions:
        return Path(versions[-1]).parent
    raise GymflowError(
        FailureKind.BACKEND_UNAVAILABLE,
        "PostgreSQL is not installed (no pg_ctl): install it (Debian: apt-get install "
        "postgresql), or point the stack's servers at a PostgreSQL of your own",
    )


def _major(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


def ensure_cluster(pg: Postgres) -> bool:
    """Create the cluster once (``initdb``); True when it was created now."""
    if (pg.data / "PG_VERSION").exists():
        return False
    pg.data.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(pg.data.parent, "postgres", "postgres")
        shutil.chown(pg.data, "postgres", "postgres")
    _run([str(bin_dir() / "initdb"), "-D", str(pg.data), "-A", "trust", "-U", ROLE, "-E", "UTF8"])
    return True


def start(pg: Postgres, timeout_s: int = 60) -> None:
    options = f"-p {pg.port} -k {pg.data} -c listen_addresses=127.0.0.1"
    _run([str(bin_dir() / "pg_ctl"), "-D", str(pg.data), "-l", str(pg.log), "-o", options,
          "-w", "-t", str(timeout_s), "start"])  # fmt: skip


def stop(pg: Postgres, timeout_s: int = 60) -> None:
    _run([str(bin_dir() / "pg_ctl"), "-D", str(pg.data), "-m", "fast", "-w", "-t",
          str(timeout_s), "stop"])  # fmt: skip


def restart(pg: Postgres, timeout_s: int = 60) -> None:
    stop(pg, timeout_s)
    start(pg, timeout_s)


def running(pg: Postgres) -> bool:
    if not (pg.data / "PG_VERSION").exists():
        return False
    done = subprocess.run(
        _as_owner([str(bin_dir() / "pg_ctl"), "-D", str(pg.data), "status"]),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


def ensure_databases(pg: Postgres, names: tuple[str, ...] = DATABASES) -> None:
    """Create each database that is not there yet."""
    psql = [str(bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", ROLE]
    listed = subprocess.run(
        [*psql, "-d", "postgres", "-tAc", "SELECT datname FROM pg_database"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.returncode != 0:
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"PostgreSQL on port {pg.port} does not answer: {listed.stderr.strip()}",
        )
    have = set(listed.stdout.split())
    for name in names:
        if name not in have:
            _run([*psql, "-d", "postgres", "-c", f'CREATE DATABASE "{name}"'], as_owner=False)


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], as_owner: bool = True) -> None:
    done = subprocess.run(
        _as_owner(command) if as_owner else command,
        capture_output=True, text=True, check=False, cwd="/",
    )  # fmt: skip
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"{Path(command[0]).name} failed ({done.returncode}): {' | '.join(tail)}",
        )
