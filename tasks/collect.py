"""Collect rollouts (stand-alone): G samples per task into Parquet with full lineage.

Retries are safe: a collection resumes from the part files already written (same run id), so
a retried attempt collects only what is missing (a Prefect retry does not re-run rows that
failed; ``retry_failed`` in the options does). No result cache: what is done is on disk.
"""

from __future__ import annotations

from prefect import task

from gymflow.rollout.collection import CollectOptions, run_collect


@task(name="collect_rollouts", retries=2, retry_delay_seconds=5)
def collect_rollouts(options: CollectOptions) -> dict:
    """The collection's report (:class:`gymflow.rollout.engine.CollectReport`) as a dict."""
    return run_collect(options).as_dict()
