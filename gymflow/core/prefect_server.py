"""Before any work against a Prefect server: does it answer, take the auth string, match?

``orchestrator_unavailable`` when nothing answers at ``PREFECT_API_URL`` or the server refuses
``PREFECT_API_AUTH_STRING`` (its ``PREFECT_SERVER_API_AUTH_STRING``), ``version_mismatch``
when it runs another major.minor release of Prefect than this machine. One quick request each.
"""

from __future__ import annotations

import base64
import os

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tracking_server import check_versions


def check_prefect(api: str, timeout_s: float = 10.0) -> str:
    """The Prefect server at ``api`` answers, takes the auth string, runs this release."""
    import httpx

    headers = {}
    if auth := os.environ.get("PREFECT_API_AUTH_STRING"):
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    base = api.rstrip("/")
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as client:
            health = client.get(f"{base}/health")
            version = client.get(f"{base}/admin/version")
    except httpx.HTTPError as exc:
        raise _no_prefect(base, f"{type(exc).__name__}: {exc}") from None
    if health.status_code == 401 or version.status_code == 401:
        raise GymflowError(
            FailureKind.ORCHESTRATOR_UNAVAILABLE,
            f"the Prefect server at {base} refused the auth string (401); set "
            "PREFECT_API_AUTH_STRING to the server's PREFECT_SERVER_API_AUTH_STRING",
        )
    if health.status_code != 200 or version.status_code != 200:
        raise _no_prefect(base, f"/health answered {health.status_code}")
    from importlib.metadata import version as installed

    server = version.json()
    check_versions("Prefect", server, installed("prefect"), base)
    return f"Prefect server {base} answers (Prefect {server})"


def _no_prefect(base: str, why: str) -> GymflowError:
    return GymflowError(
        FailureKind.ORCHESTRATOR_UNAVAILABLE,
        f"no Prefect server answers at {base} ({why}); start it (gymflow stack up) or fix "
        "PREFECT_API_URL",
    )
