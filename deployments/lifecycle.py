"""Serve the lifecycle flow as a scheduled Prefect deployment (nightly by default).

    PREFECT_HOME=$PWD/.prefect .venv/bin/prefect server start --background   # the scheduler
    PREFECT_API_URL=http://127.0.0.1:4200/api .venv/bin/python -m gymflow.deployments.lifecycle --cron "0 3 * * *"

Each scheduled run gets a new run id and starts from the registry's champion (or the embedded
model on the first run), so a run with nothing new still evaluates and gates honestly.
Stop the serving process with SIGTERM (Prefect pauses the schedule on exit).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gymflow.lifecycle.home import configure_prefect, project_home

configure_prefect(project_home())  # before Prefect reads its settings

from prefect import flow  # noqa: E402


@flow(name="rlvr-lifecycle-scheduled")
def scheduled_lifecycle(config: dict | None = None) -> dict:
    """Entry point of the deployment: one lifecycle run with a fresh run id."""
    from gymflow.core.ids import new_run_id
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_config import run_config
    from gymflow.lifecycle.run_context import open_run

    home = project_home()
    cfg = run_config(overrides=config)  # bad_config, naming the field, before any work
    return lifecycle(open_run(home, home / "runs" / new_run_id(), cfg), cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cron", default="0 3 * * *", help="Cron schedule (UTC).")
    parser.add_argument("--name", default="nightly")
    parser.add_argument(
        "--config", type=Path, help="JSON file of LifecycleConfig fields every run overrides."
    )
    args = parser.parse_args()
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.run_config import read_overrides, run_config

    try:  # refuse a bad config now, not at 03:00
        overrides = read_overrides(args.config) if args.config else None
        run_config(overrides=overrides)
    except GymflowError as exc:
        sys.exit(f"error: {exc}")
    scheduled_lifecycle.serve(
        name=args.name,
        cron=args.cron,
        tags=["gymflow"],
        limit=1,
        parameters={"config": overrides} if overrides else None,
    )


if __name__ == "__main__":
    main()
