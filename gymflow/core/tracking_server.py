"""Before any work against an MLflow tracking server: does it answer, take the login, match?

One quick request each (no retries, a short timeout), so a wrong address or password is one
line with a kind in seconds, not minutes of MLflow's own retries later in a run:

* ``tracking_unavailable``: nothing answers at the address (or not MLflow's ``/health``);
* ``unauthorized``: the server wants a login (its basic-auth app) and
  ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` are missing or wrong;
* ``version_mismatch``: the server's MLflow is another major.minor release than this client's.

While a run works, a server that goes away is MLflow's client's to wait for: it retries each
request with a growing backoff (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``,
``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``, which
:data:`gymflow.lifecycle.tracking.SERVER_RETRIES` raises to about eight minutes unless set)
and logs each retry as a warning (``urllib3.connectionpool - Retrying …``).
"""

from __future__ import annotations

import os

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tracking_store import without_login

TIMEOUT_S = 10.0


def check_tracking_server(uri: str, timeout_s: float = TIMEOUT_S) -> str:
    """The server's MLflow version, once it answered, took the login and matched this client."""
    import httpx

    base = uri.rstrip("/")
    shown = without_login(base)
    try:
        with httpx.Client(timeout=timeout_s, auth=_login()) as client:
            health = client.get(f"{base}/health")
            if health.status_code != 200:
                raise _unavailable(shown, f"/health answered {health.status_code}")
            version = client.get(f"{base}/version").text.strip()
            search = client.get(
                f"{base}/api/2.0/mlflow/experiments/search", params={"max_results": 1}
            )
    except httpx.HTTPError as exc:
        raise _unavailable(shown, f"{type(exc).__name__}: {exc}") from None
    if search.status_code in (401, 403):
        raise GymflowError(
            FailureKind.UNAUTHORIZED,
            f"the MLflow server at {shown} refused the login ({search.status_code}); set "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account of that server",
        )
    if search.status_code != 200:
        raise _unavailable(shown, f"the experiments API answered {search.status_code}")
    check_versions("MLflow", version, _client_version(), shown)
    return version


def check_versions(what: str, server: str, client: str, where: str) -> None:
    """``version_mismatch`` unless ``server`` and ``client`` share their major.minor release.

    >>> check_versions("MLflow", "3.17.2", "3.17.0", "http://h:5000")
    >>> check_versions("MLflow", "2.22.1", "3.17.2", "http://h:5000")
    Traceback (most recent call last):
    ...
    gymflow.core.failures.GymflowError: [version_mismatch] the MLflow server at http://h:5000 runs 2.22.1 and this machine's client 3.17.2; install MLflow 2.22.* here (or the same release on the server)
    """
    if _release(server) != _release(client):
        raise GymflowError(
            FailureKind.VERSION_MISMATCH,
            f"the {what} server at {where} runs {server} and this machine's client {client}; "
            f"install {what} {'.'.join(_release(server))}.* here (or the same release on the "
            "server)",
        )


def _release(version: str) -> tuple[str, ...]:
    return tuple(version.split("+")[0].split(".")[:2])


def _client_version() -> str:
    from importlib.metadata import version

    return version("mlflow")


def _login():
    """MLflow's own login variables, as its REST client reads them."""
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return (user, password)
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return _Bearer(token)
    return None


class _Bearer:
    """``Authorization: Bearer TOKEN`` (httpx's auth protocol: a callable over the request)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request):
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request


def _unavailable(shown: str, why: str) -> GymflowError:
    return GymflowError(
        FailureKind.TRACKING_UNAVAILABLE,
        f"no MLflow tracking server answers at {shown} ({why}); start it (gymflow stack up), "
        "or fix MLFLOW_TRACKING_URI / tracking.uri",
    )
