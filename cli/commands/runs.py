"""``gymflow runs list`` and ``gymflow rerun RUN_ID``: the project's lifecycle runs.

``rerun`` resumes a run in its own folder with its saved config, as ``gymflow run --run``:
finished stages come back from Prefect's cache, the failed stage and those after it run, and
GRPO resumes from its last checkpoint. A scheduled run (``sched-…``) is rerun the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gymflow.cli.common import command_app, command_group, quiet_option, set_option

OUT_OPTION = typer.Option(None, "--out", help="Folder of run folders (default: <home>/runs).")

runs_app = command_group("Lifecycle runs: list them.")
rerun_app = command_app()


def _runs_dir(out: Path | None) -> Path:
    from gymflow.lifecycle.home import project_home

    return (out or project_home() / "runs").resolve()


def _run_folders(runs: Path) -> list[Path]:
    if not runs.is_dir():
        return []
    found = [p for p in runs.iterdir() if (p / "config.json").exists()]
    return sorted(found, key=lambda p: (p / "config.json").stat().st_mtime, reverse=True)


def _status(folder: Path) -> str:
    summary_file = folder / "summary.json"
    if not summary_file.exists():
        return "unfinished (gymflow rerun resumes it)"
    s = json.loads(summary_file.read_text())
    reg = s["registry"]
    moved = "champion" if reg["champion_alias_moved"] else "not promoted"
    return (
        f"done in {s['wall_s']:.0f} s; held-out success {s['heldout']['candidate']['success']:.3f}; "
        f"v{reg['version']} ({reg.get('candidate')}) {moved}"
    )


@runs_app.command("list")
def runs_list(out: Path = OUT_OPTION) -> None:
    """Runs newest first: id, and whether they finished (with their gate and registry)."""
    folders = _run_folders(_runs_dir(out))
    if not folders:
        typer.echo(f"no runs in {_runs_dir(out)}")
        return
    for folder in folders:
        typer.echo(f"{folder.name}\t{_status(folder)}")


@rerun_app.command("rerun")
def rerun(
    run_id: str = typer.Argument(..., help="The run to resume (see `gymflow runs list`)."),
    out: Path = OUT_OPTION,
    config: Path = typer.Option(None, help="JSON file of fixes merged onto the saved config."),
    sets: list[str] = set_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Resume a run: finished stages are reused, the rest run.

    RUN_ID runs on in its folder with its saved config (--config and --set change it);
    finished stages come from Prefect's cache, the trainers resume from their last checkpoint.

    Example: gymflow rerun 20261128-101500-ab12 --set grpo.time_budget_s=600
    """
    runs = _runs_dir(out)
    if not (runs / run_id / "config.json").exists():
        from gymflow.cli.errors import fail

        known = ", ".join(p.name for p in _run_folders(runs)[:5]) or "none"
        fail("bad_request", f"no run {run_id!r} in {runs} (latest: {known}; see gymflow runs list)")
    from gymflow.cli.commands.run import start_run

    start_run(runs, run_id, config, sets, False, None, quiet)
