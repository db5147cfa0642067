"""Prefect tasks: one lifecycle stage each, thin over the ``gymflow`` library.

Every stage persists its result and caches on its inputs and source code (no run id in the
policy, so a new flow run of the same lifecycle run id skips the stages that already finished
and resumes at the one that failed). Stages return typed results
(:mod:`gymflow.lifecycle.stage_results`: paths and numbers) and take earlier ones as inputs;
the data itself lives in the run folder and in MLflow.
"""
