"""``gymflow stack check``: are the servers this machine is pointed at usable? One line each.

What it reads is what a run reads: ``MLFLOW_TRACKING_URI`` / ``MLFLOW_REGISTRY_URI`` (else the
home's store), ``PREFECT_API_URL`` with ``PREFECT_API_AUTH_STRING`` (else a temporary server
of the home), and the work pool deployments go to. Each problem is a
:class:`~gymflow.core.failures.GymflowError` with its kind: ``tracking_unavailable``,
``unauthorized``, ``bad_config`` (a registry URI of an unsupported scheme),
``orchestrator_unavailable``, ``version_mismatch``, ``bad_request`` (no such pool).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.prefect_server import check_prefect
from gymflow.core.tracking_server import check_tracking_server
from gymflow.core.tracking_store import tracking_store


@dataclass(frozen=True)
class Finding:
    part: str
    ok: bool
    line: str
    kind: str | None = None


def check_all(home: Path, pool: str | None = None) -> list[Finding]:
    """Tracking, registry, Prefect and (with ``pool``) the work pool; a failed part stops
    the checks that need it."""
    found = [_finding("mlflow", lambda: _tracking(home))]
    api = os.environ.get("PREFECT_API_URL")
    if api:
        found.append(_finding("prefect", lambda: check_prefect(api)))
        if pool and found[-1].ok:
            found.append(_finding("pool", lambda: _pool(pool)))
    else:
        what = "no PREFECT_API_URL: runs use a temporary Prefect server of the home"
        found.append(Finding("prefect", True, what if not pool else f"{what}; --pool needs one"))
        if pool:
            found[-1] = Finding("prefect", False, found[-1].line, str(FailureKind.BAD_REQUEST))
    return found


def _finding(part: str, check: Callable[[], str]) -> Finding:
    try:
        return Finding(part, True, check())
    except GymflowError as exc:
        return Finding(part, False, exc.detail, str(exc.kind))


def _tracking(home: Path) -> str:
    store = tracking_store(home)
    if not store.server:
        where = "the home's store" if store.home_store else "a database"
        return f"MLflow tracking: {where} {store.shown()}"
    version = check_tracking_server(store.tracking_uri)
    registry = (
        "" if store.registry_uri == store.tracking_uri else f", registry {store.registry_uri}"
    )
    return f"MLflow tracking server {store.shown()} answers (MLflow {version}{registry})"


def _pool(pool: str) -> str:
    from gymflow.stack.pool import TRAIN_QUEUE, check_pool

    check_pool(pool)
    return f"work pool {pool} is there (lifecycles in its queue {TRAIN_QUEUE})"
