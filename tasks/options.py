"""Options shared by every stage task: persisted results, cache on inputs + task source, and
the progress lines a command line shows (:mod:`gymflow.lifecycle.stage_progress`)."""

from prefect.cache_policies import INPUTS, TASK_SOURCE

from gymflow.lifecycle.stage_progress import stage_completed, stage_failed, stage_running

STAGE_OPTIONS = {
    "cache_policy": INPUTS + TASK_SOURCE,
    "persist_result": True,
    "on_running": [stage_running],
    "on_completion": [stage_completed],
    "on_failure": [stage_failed],
}
