"""The work pool a team's lifecycles run on, and the limit on how many train at once.

A Prefect *process* work pool: workers on any machine (``prefect worker start --pool NAME``)
poll it and run each flow run in a child process. The pool's lifecycle deployments go to its
work queue :data:`TRAIN_QUEUE`, whose concurrency limit is the number of lifecycles that may
run at once: a worker takes the N+1-th only when one of the N has ended, whoever started it (a
schedule, the UI, ``prefect deployment run``). The Prefect server counts the queue's running
flow runs in its database, so a server restart changes nothing; a run whose worker was killed
holds its place until it is retried or cancelled. Evaluations and collections go to the pool's
default queue, unlimited. The client talks to the server ``PREFECT_API_URL`` names.
"""

from __future__ import annotations

from gymflow.core.failures import FailureKind, GymflowError

TRAIN_QUEUE = "training"


def ensure_pool(pool: str, train_limit: int) -> list[str]:
    """Create the process work pool and its training queue if missing (the queue's limit set to
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
        try:
            queue = client.read_work_queue_by_name(TRAIN_QUEUE, work_pool_name=pool)
            client.update_work_queue(queue.id, concurrency_limit=train_limit)
        except ObjectNotFound:
            client.create_work_queue(
                TRAIN_QUEUE, work_pool_name=pool, concurrency_limit=train_limit,
                description="gymflow lifecycles: at most this many train at once",
            )  # fmt: skip
        said.append(f"work queue {pool}/{TRAIN_QUEUE}: {train_limit} lifecycle(s) at once")
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
