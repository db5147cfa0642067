"""Stand-alone rollout collection: one environment, one task file, one policy → Parquet.

Deploy or schedule it like the lifecycle (``collect.serve(cron=...)``, parameters
``{"options": {...}}``); re-running it with the same ``out`` (or ``run_id``) resumes the
collection instead of starting over, and with ``retry_failed`` runs again the rollouts an env or
policy fault left without a reward. With ``engine: ray`` the episodes run on Ray workers (on
``ray_address``, or a local cluster the task starts and stops; in a process already connected to
Ray, that cluster); the rows land in ``out`` the same way.
"""

from __future__ import annotations

from prefect import flow

from gymflow.rollout.collection import CollectOptions
from gymflow.tasks.collect import collect_rollouts


@flow(name="collect-rollouts")
def collect(options: CollectOptions) -> dict:
    """Collect ``options.num_repeats`` rollouts per task into ``options.out``; the report."""
    return collect_rollouts(options.model_copy(update={"progress": False}))
