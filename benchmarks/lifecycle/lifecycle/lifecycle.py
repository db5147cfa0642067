"""Lifecycle benchmark: wall time per stage and the orchestration overhead of one run.

    python benchmarks/lifecycle/lifecycle/lifecycle.py [--smoke] [--seed S] [--runs N] [--with-ui] [--ui 3]
                                   [--home DIR] [--json] [--out FILE]

One ``gymflow run`` (the embedded default, or ``--smoke``) in a fresh project home, in this
process, as the CLI does it: ``open_run`` then the Prefect flow (its ephemeral API server
included, as ``gymflow run`` starts it). Each stage's interval is read back from its MLflow
stage run (start time, and the stage's own wall time ``stage_wall_s``); stages that run at the
same time (GRPO and the SFT control beside it) count once, as the union of their intervals.

* ``stages`` — each stage's wall time (s);
* ``stage_work_s`` — the union of the stages' intervals;
* ``overhead_s`` = run wall − ``stage_work_s``: what Prefect and MLflow cost outside the stages
  (engine and API server start, task submission, result persistence and cache keys, the
  stages' artifacts and log lines, linking the two UIs, summary, plots and report), split into
  ``before_first_stage_s``, ``between_stages_s`` and ``after_last_stage_s``;
* ``overhead_share`` = ``overhead_s`` / run wall (goal ≤ 0.05);
* ``--runs N`` runs one after another in one home (the first also creates the Prefect and
  MLflow databases); ``--with-ui`` runs them against a ``gymflow ui`` Prefect server instead of
  the temporary one ``gymflow run`` starts otherwise;
* with ``--ui N``: ``gymflow ui`` started N times on that home, seconds until both UIs answer.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A script's own folder comes first on sys.path, where a benchmark's name could shadow a standard
# module: import the benchmarks as a package from the repo instead.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.common import arguments, emit  # noqa: E402


def run_lifecycle(home: Path, smoke: bool, seed: int | None) -> tuple[dict, float, float]:
    """One run in ``home``; ``(summary, started, ended)`` as ``time.time()`` stamps."""
    os.environ["GYMFLOW_HOME"] = str(home)
    from gymflow.core.watchdog import start_watchdog
    from gymflow.lifecycle.home import configure_prefect

    start_watchdog()  # as `gymflow run` does: a killed benchmark leaves no Prefect server behind

    configure_prefect(home)
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_config import run_config
    from gymflow.lifecycle.run_context import open_run

    cfg = run_config(smoke=smoke, seed=seed)
    started = time.time()
    ctx = open_run(home, home / "runs" / f"bench-{int(started)}", cfg)
    summary = lifecycle(ctx, cfg)
    return summary, started, time.time()


def stage_intervals(parent_id: str) -> dict[str, tuple[float, float]]:
    """``{stage: (start, end)}`` from the nested MLflow runs (start + ``stage_wall_s``)."""
    from mlflow import MlflowClient

    from gymflow.lifecycle.tracking import stage_runs

    client = MlflowClient()
    out = {}
    for stage, run_id in stage_runs(parent_id).items():
        run = client.get_run(run_id)
        start = run.info.start_time / 1000
        out[stage] = (start, start + run.data.metrics["stage_wall_s"])
    return out


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def ui_ready_s(home: Path, times: int) -> list[float]:
    """Start ``gymflow ui`` on ``home`` ``times`` times; seconds until both UIs answered."""
    gymflow = str(Path(sys.executable).parent / "gymflow")
    out = []
    for _ in range(times):
        proc = subprocess.Popen(
            [gymflow, "ui", "--prefect-port", "4399", "--mlflow-port", "5399"],
            env=os.environ | {"GYMFLOW_HOME": str(home)}, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for line in proc.stdout:
            if found := re.search(r"both answering after ([0-9.]+) s", line):
                out.append(float(found.group(1)))
                break
        proc.terminate()
        proc.wait(timeout=60)
    return out


def measure(summary: dict, started: float, ended: float) -> dict:
    """One run's figures (see the module's docstring)."""
    intervals = stage_intervals(summary["mlflow_run_id"])
    work = union(list(intervals.values()))
    wall = ended - started
    work_s = sum(b - a for a, b in work)
    return {
        "wall_s": round(wall, 2),
        "stages": {
            k: round(b - a, 2) for k, (a, b) in sorted(intervals.items(), key=lambda x: x[1])
        },
        "stage_work_s": round(work_s, 2),
        "overhead_s": round(wall - work_s, 2),
        "overhead_share": round((wall - work_s) / wall, 4),
        "before_first_stage_s": round(work[0][0] - started, 2),
        "between_stages_s": round(sum(b[0] - a[1] for a, b in itertools.pairwise(work)), 2),
        "after_last_stage_s": round(ended - work[-1][1], 2),
        "gate": summary["gate"]["reason"],
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--runs", type=int, default=1, help="runs one after another, one home")
    parser.add_argument(
        "--with-ui", action="store_true", help="runs use a `gymflow ui` Prefect server"
    )
    parser.add_argument("--ui", type=int, default=0, help="also time `gymflow ui` N times")
    parser.add_argument("--home", type=Path, help="project home to use (default: a temp dir)")
    args = parser.parse_args()
    home = (args.home or Path(tempfile.mkdtemp(prefix="gymflow-bench-"))).resolve()
    home.mkdir(parents=True, exist_ok=True)
    servers = None
    if args.with_ui:  # before Prefect is imported: runs then use this server's API
        from gymflow.lifecycle.ui_links import write_ui_addresses
        from gymflow.lifecycle.ui_servers import UIServers

        servers = UIServers(home, prefect_port=4398, mlflow_port=5398)
        servers.start()
        write_ui_addresses(home, servers.prefect_url, servers.mlflow_url)
    try:
        runs = [measure(*run_lifecycle(home, args.smoke, args.seed)) for _ in range(args.runs)]
    finally:
        if servers is not None:
            servers.stop()
    result = {
        "benchmark": "lifecycle",
        "config": "smoke" if args.smoke else "default",
        "seed": args.seed,
        "prefect": "gymflow ui's server" if args.with_ui else "temporary server (as gymflow run)",
        "home": str(home),
        "cpu_count": os.cpu_count(),
        "runs": runs,
    }
    if args.ui:
        result["ui_ready_s"] = ui_ready_s(home, args.ui)
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
