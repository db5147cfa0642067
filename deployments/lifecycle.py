"""The project's Prefect deployments: the lifecycle, evaluation and collection flows on cron.

    gymflow ui                                   # the project's Prefect server (and MLflow UI)
    gymflow deploy --cron "0 3 * * *"            # registers the deployments and serves them

(``python -m gymflow.deployments.lifecycle`` does the same as ``gymflow deploy``.) Parameters
are typed: the lifecycle's are :class:`~gymflow.lifecycle.config.LifecycleConfig`'s fields, the
evaluation's :class:`~gymflow.eval.suite.EvalOptions`, the collection's
:class:`~gymflow.rollout.collection.CollectOptions`, so the Prefect UI shows a form, not a JSON
box. A scheduled lifecycle run first fingerprints its inputs (task-data hash, champion version,
config digest, code version: :mod:`gymflow.lifecycle.run_inputs`); when a finished run had the
same, it ends in seconds and says which run did the work. Its run id comes from its flow run,
so a retry of a failed flow run (the Prefect UI's Retry, or ``gymflow rerun``) works in the
same run folder: finished stages are reused and the failed one runs again.

With a work pool (``gymflow deploy --pool NAME``) the same deployments are registered with the
pool instead of served here: their entrypoints are module paths (the installed package, on
every worker), and the lifecycle goes to the pool's training queue
(:data:`gymflow.stack.pool.TRAIN_QUEUE`), whose concurrency limit lets at most N lifecycles
run at once on the pool, whoever started them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gymflow.lifecycle.home import configure_prefect, project_home

configure_prefect(project_home())  # before Prefect reads its settings

from prefect import flow  # noqa: E402

from gymflow.lifecycle.config import LifecycleConfig  # noqa: E402


def scheduled_run_id(flow_run_id: str | None) -> str:
    """One run id per flow run (its retries included); a fresh one outside a flow run.

    The whole flow-run id, not a prefix: Prefect's ids are UUIDv7, whose first 48 bits are the
    creation millisecond, so runs its scheduler creates in one batch share any short prefix —
    and a run id shared with an earlier run would reuse that run's folder and cached stages.
    """
    from gymflow.core.ids import new_run_id

    return f"sched-{flow_run_id}" if flow_run_id else new_run_id()


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    return scheduled_run_id(flow_run.get_id())


@flow(name="rlvr-lifecycle-scheduled", flow_run_name=_flow_run_name)
def scheduled_lifecycle(config: LifecycleConfig | None = None, force: bool = False) -> dict:
    """A lifecycle run of ``config`` (default: the embedded default) unless nothing changed
    since a finished run (``force`` runs anyway)."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.logging import get_run_logger
    from prefect.runtime import flow_run

    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_config import check_env
    from gymflow.lifecycle.run_context import open_run
    from gymflow.lifecycle.run_inputs import current_inputs, finished_run_with
    from gymflow.lifecycle.tracking import configure

    home = project_home()
    cfg = config or LifecycleConfig()
    check_env(cfg.env)  # bad_config, naming the environments there are, before any work
    configure(home, cfg.tracking.uri, cfg.tracking.registry_uri)
    run_dir = home / "runs" / scheduled_run_id(flow_run.get_id())
    if not force and not (run_dir / "config.json").exists():
        inputs = current_inputs(cfg)
        if (done := finished_run_with(inputs)) is not None:
            reason = f"nothing new since run {done}: {inputs.describe()}"
            get_run_logger().info("skipped: %s", reason)
            create_markdown_artifact(f"**Skipped** — {reason}.", key="lifecycle-skipped")
            return {"skipped": True, "same_as_run": done, "reason": reason}
    return lifecycle(open_run(home, run_dir, cfg), cfg)


def lifecycle_deployment(
    cron: str | None, config: LifecycleConfig, name: str = "nightly", pool: str | None = None
):
    """The scheduled lifecycle with every field of ``config`` as its parameters (one at a time);
    for ``pool``, a deployment of the pool's training queue (its limit counts every
    lifecycle deployment's runs)."""
    limits = {"concurrency_limit": 1}
    if pool is not None:
        from gymflow.stack.pool import TRAIN_QUEUE

        limits = {"work_queue_name": TRAIN_QUEUE}
    return scheduled_lifecycle.to_deployment(
        name=name, cron=cron, tags=["gymflow"], parameters={"config": config.model_dump()},
        description="The RLVR lifecycle; skips when nothing is new.", **limits, **_for_pool(pool),
    )  # fmt: skip


def evaluate_deployment(
    cron: str | None, env: str, name: str = "champion-eval", pool: str | None = None
):
    from gymflow.flows.evaluate import evaluate
    from gymflow.lifecycle.model_registry import registered_name

    options = {"envs": [env], "policy": f"models:/{registered_name(env)}@champion"}
    return evaluate.to_deployment(
        name=name, cron=cron, tags=["gymflow"], parameters={"options": options}, **_for_pool(pool)
    )


def collect_deployment(cron: str | None, options: dict, name: str = "collect", pool=None):
    from gymflow.flows.collect import collect

    return collect.to_deployment(
        name=name, cron=cron, tags=["gymflow"], parameters={"options": options}, **_for_pool(pool)
    )


def _for_pool(pool: str | None) -> dict:
    """A work pool's workers import the flow from the installed package (no code upload)."""
    if pool is None:
        return {}
    from prefect.deployments.runner import EntrypointType

    return {"entrypoint_type": EntrypointType.MODULE_PATH}


def register_with_pool(deployments: list, pool: str) -> list[str]:
    """Register ``deployments`` with the work pool ``pool`` (which must exist); one line each."""
    from gymflow.stack.pool import check_pool

    check_pool(pool)
    return [
        f"deployment {d.flow_name}/{d.name} -> pool {pool} (id {d.apply(work_pool_name=pool)})"
        for d in deployments
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cron", default="0 3 * * *", help="Lifecycle schedule (UTC).")
    parser.add_argument("--name", default="nightly")
    parser.add_argument(
        "--config", type=Path, help="JSON file of LifecycleConfig fields every run overrides."
    )
    args = parser.parse_args(argv)
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.run_config import read_overrides, run_config

    try:  # refuse a bad config now, not at 03:00
        overrides = read_overrides(args.config) if args.config else None
        cfg = run_config(overrides=overrides)
    except GymflowError as exc:
        sys.exit(f"error: {exc}")
    import os

    from gymflow.deployments.serving import serve_until_stopped

    api_url = os.environ.get("PREFECT_API_URL", "the Prefect server")
    sys.exit(serve_until_stopped([lifecycle_deployment(args.cron, cfg, args.name)], api_url))


if __name__ == "__main__":
    main()
