"""Options shared by every stage task: persisted results, cache on inputs + task source."""

from prefect.cache_policies import INPUTS, TASK_SOURCE

STAGE_OPTIONS = {"cache_policy": INPUTS + TASK_SOURCE, "persist_result": True}
