"""Prefect artifacts of a stage or a run, published only inside a Prefect run.

The stages are library functions (:mod:`gymflow.lifecycle.stages`): called from a Prefect task
they attach their tables and reports to it, so the UI shows them beside the stage; called from
a script or a benchmark they publish nothing and lose nothing (every artifact is also a file in
the run folder and in MLflow).
"""

from __future__ import annotations


def in_prefect_run() -> bool:
    """A Prefect flow or task run is active in this thread."""
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def table_artifact(key: str, table: list[dict], description: str) -> None:
    if in_prefect_run():
        from prefect.artifacts import create_table_artifact

        create_table_artifact(key=key, table=table, description=description)


def markdown_artifact(markdown: str, key: str, description: str) -> None:
    if in_prefect_run():
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(markdown, key=key, description=description)
