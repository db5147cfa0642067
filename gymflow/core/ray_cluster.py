"""The Ray cluster that rollout workers and env replicas run on: an existing one, or a local one.

:func:`ray_cluster` connects to a running cluster when given its address (``ray start --head``
prints it; KubeRay's head service), or starts a local one for this process and stops it on
exit. A local cluster is for one machine: it listens on loopback only (Ray otherwise binds its
servers to the machine's network address), has no dashboard and a small object store, and
its logical CPUs are ``num_cpus`` (one per actor unless more are free). If this
process is already connected to Ray (a test, a notebook, a Prefect task runner on Ray), that
connection is used as it is and left open.

Ray is an optional dependency (``pip install 'gymflow[ray]'``); without it, asking for Ray
is a ``backend_unavailable`` error that says how to install it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from gymflow.core.failures import FailureKind, GymflowError

LOCAL_OBJECT_STORE_MB = 256
"""Object store of a local cluster: rows and shards pass through it, weights do not."""

_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for single-machine mode, in which every server binds to loopback (the default on
Windows and macOS; on Linux Ray binds to the node's address unless it is set to 0)."""


@dataclass(frozen=True)
class RayCluster:
    """The cluster a collection runs on."""

    address: str
    """Its GCS address (``host:port``)."""
    local: bool
    """Started by this process (and stopped when the collection ends)."""
    start_s: float
    """Seconds to start it or connect to it (0 when this process was already connected)."""


def require_ray() -> ModuleType:
    """The ``ray`` module, or ``GymflowError(BACKEND_UNAVAILABLE)`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            "this needs Ray: pip install 'gymflow[ray]' (or run it without Ray)",
        ) from None
    return ray


@contextlib.contextmanager
def ray_cluster(
    address: str | None = None,
    num_cpus: int = 2,
    object_store_mb: int = LOCAL_OBJECT_STORE_MB,
) -> Iterator[RayCluster]:
    """Connected to the cluster at ``address``, or to a local one started for the block."""
    ray = require_ray()
    if address:
        _refuse_unreachable(address)
    if ray.is_initialized():
        yield RayCluster(_gcs_address(ray), local=False, start_s=0.0)
        return
    started = time.perf_counter()
    try:
        if address:
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        else:
            with _loopback_only():
                ray.init(
                    address="local",  # a new cluster even where RAY_ADDRESS names one
                    num_cpus=num_cpus,
                    include_dashboard=False,
                    object_store_memory=object_store_mb << 20,
                    logging_level="WARNING",
                    log_to_driver=False,
                )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"could not connect to {where}: {exc}; start it with `ray start --head` (and give "
            "the address it prints), or give no Ray address for a local cluster",
        ) from None
    cluster = RayCluster(_gcs_address(ray), not address, round(time.perf_counter() - started, 2))
    try:
        yield cluster
    finally:
        ray.shutdown()  # stops a local cluster; only disconnects from an existing one


def join_environment(cluster: RayCluster) -> dict[str, str]:
    """Environment variables another process of this machine needs (set before it imports Ray)
    to join ``cluster``: a local cluster listens on loopback only, and outside single-machine
    mode Ray replaces a loopback address with the node's network address."""
    return {_SINGLE_MACHINE: "0"} if cluster.local else {}


def _refuse_unreachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds where nothing listens at a ``host:port`` address: Ray itself retries
    for minutes before it gives up."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", a ray:// client address ...: Ray's own checks apply
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"no Ray cluster answers at {address} ({exc}); start one with `ray start --head` "
            "(and give the address it prints), or give no Ray address for a local cluster",
        ) from None


def _gcs_address(ray: ModuleType) -> str:
    return ray.get_runtime_context().gcs_address


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Start Ray's processes in single-machine mode: the variable for the processes it starts,
    the constant it was read into for this one (read when ``ray`` was imported)."""
    from ray._private import ray_constants

    before_env, before_flag = os.environ.get(_SINGLE_MACHINE), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_SINGLE_MACHINE] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before_flag
        if before_env is None:
            os.environ.pop(_SINGLE_MACHINE, None)
        else:
            os.environ[_SINGLE_MACHINE] = before_env
