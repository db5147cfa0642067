"""The stack's processes: what each runs, with which environment.

* ``prefect`` — ``prefect server start`` on the stack's PostgreSQL
  (``PREFECT_API_DATABASE_CONNECTION_URL``), with ``PREFECT_SERVER_API_AUTH_STRING`` when the
  environment of ``gymflow stack up`` holds one;
* ``mlflow`` — ``mlflow server`` on PostgreSQL with ``--serve-artifacts``: artifacts land in
  ``<folder>/artifacts`` and every client reads and writes them through the server
  (``mlflow-artifacts:``); MLflow's ``basic-auth`` app with ``mlflow_login``;
* ``worker-N`` — ``prefect worker start --pool POOL --type process``: it runs the pool's flow
  runs in child processes whose home is the stack's home, tracking to the stack's MLflow
  server, with stage results in the stack's result storage.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.tracking_store import HOME_STORE_VAR
from gymflow.stack.postgres import Postgres
from gymflow.stack.settings import StackSettings

AUTH_DATABASE = "mlflow_auth"


@dataclass(frozen=True)
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    marker: bytes
    """What its command line holds (a recycled pid is not taken for it)."""
    health: str | None
    """The address that answers 200 once it serves (None: a worker)."""


def base_env(*passed_on: str) -> dict[str, str]:
    """This environment, less what would point a stack process elsewhere, plus the secrets
    ``passed_on`` that it holds (they reach a process only through its environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env.pop(HOME_STORE_VAR, None)
    return env | {k: os.environ[k] for k in passed_on if k in os.environ}


def prefect_server(settings: StackSettings, root: Path, pg: Postgres) -> Server:
    env = base_env("PREFECT_SERVER_API_AUTH_STRING") | {
        "PREFECT_HOME": str(root / "prefect"),
        "PREFECT_API_DATABASE_CONNECTION_URL": pg.url("prefect", "postgresql+asyncpg"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_API_HOST": settings.host,
        "PREFECT_SERVER_API_PORT": str(settings.prefect_port),
    }
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", settings.host,
               "--port", str(settings.prefect_port)]  # fmt: skip
    return Server("prefect", command, env, b"prefect", f"{settings.prefect_api}/health")


def mlflow_server(settings: StackSettings, root: Path, pg: Postgres) -> Server:
    command = [
        sys.executable, "-m", "mlflow", "server", "--backend-store-uri", pg.url("mlflow"),
        "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
        "--host", settings.host, "--port", str(settings.mlflow_port), "--workers", "1",
    ]  # fmt: skip
    env = base_env("MLFLOW_AUTH_ADMIN_PASSWORD") | {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        # MLflow's job runner (GenAI scorers and the like; seven consumer processes): unused
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    if settings.mlflow_login:
        command += ["--app-name", "basic-auth"]
        env["MLFLOW_AUTH_CONFIG_PATH"] = str(write_auth_config(root, pg))
        env["MLFLOW_FLASK_SERVER_SECRET_KEY"] = os.environ.get(
            "MLFLOW_FLASK_SERVER_SECRET_KEY"
        ) or _session_key(root)
    return Server("mlflow", command, env, b"mlflow", f"{settings.mlflow_uri}/health")


def _session_key(root: Path) -> str:
    """The login app's CSRF key: ``MLFLOW_FLASK_SERVER_SECRET_KEY``, else one made once and
    kept readable by this user only in the stack folder (the same across restarts)."""
    import secrets

    path = root / "mlflow_session_key"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(32))
    return path.read_text().strip()


def write_auth_config(root: Path, pg: Postgres) -> Path:
    """MLflow's basic-auth settings: its users in the stack's PostgreSQL; no password here
    (the admin's is ``MLFLOW_AUTH_ADMIN_PASSWORD`` when the users' table is first made)."""
    path = root / "basic_auth.ini"
    path.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = {pg.url(AUTH_DATABASE)}\nadmin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    return path


def worker(settings: StackSettings, root: Path, home: Path, number: int) -> Server:
    env = client_env(settings, home) | {
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(settings.results_path(home)),
        "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
        "GYMFLOW_HOME": str(home),
    }
    # a flow run rides out a Prefect server restart: its client retries a lost connection 8
    # times, the wait doubling from 2 s (about 8 minutes; Prefect's default 5 is about 1)
    env["PREFECT_CLIENT_MAX_RETRIES"] = os.environ.get("PREFECT_CLIENT_MAX_RETRIES", "8")
    name = f"{settings.pool}-{os.uname().nodename}-{number}"
    command = [sys.executable, "-m", "prefect", "worker", "start", "--pool", settings.pool,
               "--type", "process", "--name", name]  # fmt: skip
    return Server(f"worker-{number}", command, env, b"prefect", None)


def client_env(settings: StackSettings, home: Path) -> dict[str, str]:
    """What a client of the stack sets: the two servers' addresses, the auth string passed on."""
    env = base_env("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD") | {
        "PREFECT_API_URL": settings.prefect_api,
        "MLFLOW_TRACKING_URI": settings.mlflow_uri,
        "PREFECT_HOME": str(home / ".prefect"),
    }
    if "PREFECT_SERVER_API_AUTH_STRING" in os.environ:
        env["PREFECT_API_AUTH_STRING"] = os.environ["PREFECT_SERVER_API_AUTH_STRING"]
    return env
