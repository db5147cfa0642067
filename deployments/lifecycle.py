"""Serve the lifecycle flow as a scheduled Prefect deployment (nightly by default).

    gymflow-home$ prefect server start --background        # the scheduler lives in the server
    gymflow-home$ .venv/bin/python -m deployments.lifecycle --cron "0 3 * * *"

Each scheduled run starts from the registry's champion (or the embedded model on the first
run), so a run with nothing new still evaluates and gates honestly. Stop with SIGTERM.
"""

from __future__ import annotations

import argparse
import secrets
import time


def scheduled_lifecycle(config: dict | None = None) -> dict:
    """Entry point of the deployment: a new run id per scheduled run."""
    from flows.lifecycle import lifecycle
    from gymflow.config import LifecycleConfig
    from gymflow.home import project_home
    from gymflow.run_context import RunContext
    from gymflow.tracking import configure, parent_run_id

    home = project_home()
    configure(home)
    cfg = LifecycleConfig.model_validate(config or {})
    run_id = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    ctx = RunContext(
        run_id=run_id, run_dir=str(run_dir), home=str(home), mlflow_parent_id=parent_run_id(run_id)
    )
    return lifecycle(ctx, cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cron", default="0 3 * * *", help="Cron schedule (UTC).")
    parser.add_argument("--name", default="nightly")
    args = parser.parse_args()
    from gymflow.home import configure_prefect, project_home

    configure_prefect(project_home())
    from prefect import flow

    deployable = flow(name="rlvr-lifecycle-scheduled")(scheduled_lifecycle)
    deployable.serve(name=args.name, cron=args.cron, tags=["gymflow"], limit=1)


if __name__ == "__main__":
    main()
