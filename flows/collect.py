"""Stand-alone rollout collection: one environment, one task file, one policy → Parquet.

Deploy or schedule it like the lifecycle (``collect.serve(cron=...)``); re-running it with the
same ``out`` (or ``run_id``) resumes the collection instead of starting over, and with
``retry_failed=True`` runs again the rollouts an env or policy fault left without a reward.
"""

from __future__ import annotations

from prefect import flow

from gymflow.tasks.collect import collect_rollouts


@flow(name="collect-rollouts")
def collect(
    env: str,
    tasks: str,
    policy: str,
    out: str,
    fmt: str = "gymflow",
    num_repeats: int = 4,
    concurrency: int = 32,
    run_id: str | None = None,
    env_url: str | None = None,
    iteration: int = 0,
    policy_version: int = 0,
    seed: int = 0,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    max_completion_tokens: int = 256,
    retry_failed: bool = False,
) -> dict:
    """Collect ``num_repeats`` rollouts per task of ``tasks`` with ``policy`` into ``out``;
    ``retry_failed`` also re-runs the rollouts that got no reward (env or policy faults)."""
    options = dict(locals())  # the flow's parameters, passed through by name
    return collect_rollouts({**options, "progress": False})
