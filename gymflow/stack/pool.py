"""The work pool a team's lifecycles run on, and the limit on how many train at once.

A Prefect *process* work pool: workers on any machine (``prefect worker start --pool NAME``)
poll it and run each flow run in a child process. Training is limited by a Prefect global
concurrency limit named :func:`train_limit_name` ``(pool)``: the pool's lifecycle deployments
hold one slot while they run (``deployments/lifecycle.py``), so with a limit of N the N+1-th
lifecycle waits, whoever started it (a schedule, the UI, ``prefect deployment run``).
The client talks to the server ``PREFECT_API_URL`` names.
"""

from __future__ import annotations

from gymflow.core.failures import FailureKind, GymflowError


def train_limit_name(pool: str) -> str:
    """``gymflow-train-<pool>``: the global concurrency limit of the pool's training."""
    return f"gymflow-train-{pool}"


def ensure_pool(pool: str, train_limit: int) -> list[str]:
    """Create the process work pool and its training limit if missing (the limit set to
    ``train_limit`` either way); what was done, one line each."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    said = []
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
            said.append(f"work pool {pool}: there")
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(
                WorkPoolCreate(name=pool, type="process", base_job_template=template)
            )
            said.append(f"work pool {pool}: created (process)")
        name = train_limit_name(pool)
        client.upsert_global_concurrency_limit_by_name(name, train_limit)
        said.append(f"concurrency limit {name}: {train_limit} lifecycle(s) training at once")
    return said


def check_pool(pool: str) -> None:
    """``bad_request`` naming the pools there are, when ``pool`` is not one of them."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            known = sorted(p.name for p in client.read_work_pools())
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"no work pool {pool!r} on the Prefect server (pools: "
                f"{', '.join(known) or 'none'}); `gymflow stack up` or `prefect work-pool "
                f"create {pool} --type process` makes one",
            ) from None
