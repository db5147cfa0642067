"""A real team stack for the tests: PostgreSQL, the Prefect and MLflow servers, workers.

Started through the product's own ``gymflow.stack.control.up`` on free loopback ports in a
folder of the test's, stopped (databases and all) when the module's tests are done. PostgreSQL
is Debian's ``postgresql`` (``make setup-dev`` installs it as root, best effort): without it
the tests skip and say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from ports import free_port  # tests/ is on the path

GYMFLOW = [sys.executable, "-m", "gymflow.cli.main"]
MICRO = [
    "--smoke", "--set", "n_tasks=200", "--set", "demos=16", "--set", "profile_samples=10",
    "--set", "val_eval_n=8", "--set", "heldout_n=16", "--set", "sft.max_steps=4",
    "--set", "sft.eval_every=2", "--set", "grpo.max_steps=1",
]  # fmt: skip
"""The smoke budget cut to a minute or so of work: every stage still runs."""

ADMIN_PASSWORD = "s3cret-Admin-pw-7731"
"""The stack's MLflow admin password in the tests: no file, log, tag or summary may hold it."""
AUTH_STRING = "team:pr3fect-Auth-5521"
"""The Prefect server's auth string when a test asks for one (a secret too)."""
_AUTH: dict[str, str] = {}
"""Prefect API URL -> the auth string its server wants (for :func:`prefect`)."""


def need_postgres() -> None:
    from gymflow.core.failures import GymflowError
    from gymflow.stack.postgres import bin_dir

    try:
        bin_dir()
    except GymflowError as exc:
        pytest.skip(f"no PostgreSQL on this machine ({exc.detail})")


def start_stack(
    folder: Path,
    workers: int = 0,
    login: bool = False,
    train_limit: int = 1,
    auth: bool = False,
    host: str = "127.0.0.1",
):
    """``(stack, client_env)``: the stack running, and the variables a client sets. ``login``:
    MLflow's basic-auth app; ``auth``: the Prefect server's auth string."""
    need_postgres()
    from gymflow.stack.control import Stack, up
    from gymflow.stack.settings import StackSettings

    settings = StackSettings(
        folder=str(folder / "stack"), postgres_port=free_port(), prefect_port=free_port(),
        mlflow_port=free_port(), workers=workers, mlflow_login=login, train_limit=train_limit,
        pool=f"pool-{folder.name[-6:]}", host=host,
    )  # fmt: skip
    home = folder / "worker-home"
    home.mkdir(parents=True, exist_ok=True)
    stack = Stack(home, settings)
    login_env = {
        "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN_PASSWORD,  # the server's first admin
        "MLFLOW_TRACKING_USERNAME": "admin",  # what the stack's workers log in with
        "MLFLOW_TRACKING_PASSWORD": ADMIN_PASSWORD,
    }
    if auth:
        login_env["PREFECT_SERVER_API_AUTH_STRING"] = AUTH_STRING
    with pytest.MonkeyPatch.context() as patch:
        for key, value in login_env.items():
            patch.setenv(key, value)
        try:
            up(stack)
        except BaseException:
            stop_stack(stack)
            raise
    client = {
        "MLFLOW_TRACKING_URI": settings.mlflow_uri,
        "PREFECT_API_URL": settings.prefect_api,
    }
    if login:
        client |= {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": ADMIN_PASSWORD}
    if auth:
        client["PREFECT_API_AUTH_STRING"] = AUTH_STRING
        _AUTH[settings.prefect_api] = AUTH_STRING
    return stack, client


def stop_stack(stack) -> None:
    """Stop every part and remove the PostgreSQL cluster (it lives outside the test folder
    when the tests run as root)."""
    from gymflow.stack.control import down

    down(stack, grace_s=10)
    shutil.rmtree(stack.pg.data, ignore_errors=True)


def wait_for(check: Callable[[], object], timeout_s: float, what: str, every_s: float = 1.0):
    """Poll ``check()`` until it returns something truthy (returned); fail after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s:.0f} s")
        time.sleep(every_s)


def gymflow(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 600, prefix=()):
    """``gymflow ARGS`` in a process of its own (its MLflow and Prefect settings its own);
    ``prefix`` runs it through another command (``ip netns exec NAME``)."""
    return subprocess.run([*prefix, *GYMFLOW, *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout_s)  # fmt: skip


@contextlib.contextmanager
def machine(tag: str, index: int):
    """Another "machine": a network namespace that reaches this one only through its own veth
    pair. Yields ``(command prefix, this machine's address as seen from it)``; without root or
    ``ip netns`` (or when one step fails), no namespace: ``((), "127.0.0.1")``, said once."""
    name = f"gf{tag}{os.getpid() % 100000}"
    host_if, ns_if = f"{name}h", f"{name}n"
    net = f"10.{200 + index}.{os.getpid() % 250}"
    inside = ["ip", "netns", "exec", name]
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", name],
        ["ip", "addr", "add", f"{net}.1/24", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        [*inside, "ip", "addr", "add", f"{net}.2/24", "dev", ns_if],
        [*inside, "ip", "link", "set", ns_if, "up"],
        [*inside, "ip", "link", "set", "lo", "up"],
    ]
    made = os.geteuid() == 0 and shutil.which("ip") is not None
    for step in steps if made else []:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"no network namespace ({' '.join(step)}: {done.stderr.strip()}): one namespace")
            made = False
            break
    try:
        yield (tuple(inside), f"{net}.1") if made else ((), "127.0.0.1")
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def seen_from(client: dict[str, str], address: str) -> dict[str, str]:
    """The client variables with the servers' loopback address replaced by ``address``."""
    return {k: v.replace("127.0.0.1", address) for k, v in client.items()}


def client_env(client: dict[str, str], home: Path, **more: str) -> dict[str, str]:
    """This process's environment pointed at the stack, with ``home`` as GYMFLOW_HOME."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_"))}
    base.pop("GYMFLOW_HOME_TRACKING_URI", None)
    return base | client | {"GYMFLOW_HOME": str(home), "GYMFLOW_PROGRESS": "quiet"} | more


def prefect(api: str, path: str, body: dict | None = None):
    """A call of the Prefect server's REST API (with its auth string, if it has one)."""
    import base64

    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api in _AUTH:
        headers["Authorization"] = "Basic " + base64.b64encode(_AUTH[api].encode()).decode()
    request = urllib.request.Request(f"{api}{path}", data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def run_deployment(api: str, name: str, parameters: dict | None = None) -> str:
    """Start a flow run of deployment ``flow/name``; its id."""
    deployment = prefect(api, f"/deployments/name/{name}")
    body = {"parameters": parameters} if parameters else {}
    return prefect(api, f"/deployments/{deployment['id']}/create_flow_run", body)["id"]


def flow_run(api: str, flow_run_id: str) -> dict:
    return prefect(api, f"/flow_runs/{flow_run_id}")


def wait_final(api: str, flow_run_id: str, timeout_s: float = 900) -> dict:
    final = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
    return wait_for(
        lambda: (run := flow_run(api, flow_run_id))["state_type"] in final and run,
        timeout_s, f"end of flow run {flow_run_id}", every_s=2,
    )  # fmt: skip
