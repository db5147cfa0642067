"""Where GRPO beats its SFT control and where it does not: held-out success by kind of task.

    python benchmarks/lifecycle/where_grpo_pays/where_grpo_pays.py RUN_DIR... [--min-tasks 40] [--out FILE]

Each ``RUN_DIR`` is a finished run's folder (``runs/<id>``) whose gate evaluated every held-out
task (``gate.sequential`` false, as ``benchmarks/lifecycle/default_seeds/default_seeds.py`` runs the report seeds): its
held-out tasks (``data/tasks-heldout.parquet``) and the start's, GRPO's and the control's rows in
``eval/heldout-<label>.parquet``. Every held-out task gets the coverage facets the task report
uses (:func:`gymflow.data.coverage.task_facets`: the tools its gold episode calls, its
template, its difficulty). Per facet value, over the runs: the held-out tasks it covers, the
success of the start, GRPO and the control, and GRPO − control (and GRPO − start) as the mean
of the per-run differences with a 95 % t-interval across runs (runs are the unit, as in
``default_seeds.py``: each seed draws its own held-out tasks and trains its own pair). A value
needs ``--min-tasks`` held-out tasks over the runs and a task in every run to be shown.

The question it answers is issue 35's: on the seeds where GRPO does not beat the control on
average, is there a kind of task where it does (or where it loses)?
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import polars as pl  # noqa: E402

from benchmarks.common import across_seeds, arguments, emit, machine  # noqa: E402
from gymflow.data.coverage import task_facets  # noqa: E402
from gymflow.data.task_table import read_tasks  # noqa: E402
from gymflow.env.registry import get_env  # noqa: E402

ARMS = {"start": "baseline", "grpo": "candidate", "control": "sft_control"}
SHOWN_FACETS = ("tool", "template", "difficulty")


def run_slices(run: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """``(facet, value) -> arm -> successes`` on one run's held-out tasks (paired by task)."""
    success = {}
    for arm, label in ARMS.items():
        path = run / "eval" / f"heldout-{label}.parquet"
        if not path.is_file():
            raise SystemExit(f"{run}: no {path.name} (a run whose gate held out every task)")
        frame = pl.read_parquet(path).filter(pl.col("sample_idx") == 0)
        success[arm] = dict(zip(frame["task_id"], frame["success"].cast(float), strict=True))
    common = set.intersection(*(set(s) for s in success.values()))
    held = read_tasks(run / "data" / "tasks-heldout.parquet")
    tasks = {t.task_id: t for t in held if t.task_id in common}
    envs = {name: get_env(name) for name in {t.env for t in tasks.values()}}
    out: dict = defaultdict(lambda: {arm: [] for arm in ARMS})
    for task_id, task in sorted(tasks.items()):
        for facet, value in task_facets(envs[task.env], task).items():
            if facet in SHOWN_FACETS:
                for arm in ARMS:
                    out[(facet, value)][arm].append(success[arm][task_id])
    return out


def table(runs: list[Path], min_tasks: int) -> list[dict]:
    per_run = [run_slices(run) for run in runs]
    keys = set().union(*per_run)
    rows = []
    for facet, value in keys:
        present = [r[(facet, value)] for r in per_run if (facet, value) in r]
        n = sum(len(p["start"]) for p in present)
        if len(present) < len(runs) or n < min_tasks:
            continue

        def mean(arm: str, present=present) -> float:
            return round(100 * statistics.fmean(x for p in present for x in p[arm]), 1)

        def diff(a: str, b: str, present=present) -> dict:
            return across_seeds(
                [100 * (statistics.fmean(p[a]) - statistics.fmean(p[b])) for p in present]
            )

        rows.append({
            "facet": facet, "value": value, "heldout_tasks": n,
            "start": mean("start"), "grpo": mean("grpo"), "control": mean("control"),
            "grpo_minus_control": diff("grpo", "control"),
            "grpo_minus_start": diff("grpo", "start"),
        })  # fmt: skip
    order = {f: i for i, f in enumerate(SHOWN_FACETS)}
    return sorted(rows, key=lambda r: (order[r["facet"]], -r["heldout_tasks"], r["value"]))


def _seed(run: Path) -> int | None:
    return json.loads((run / "config.json").read_text()).get("seed")


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (runs/<id>)")
    parser.add_argument("--min-tasks", type=int, default=40, help="held-out tasks a value needs")
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.time()
    rows = table(args.runs, args.min_tasks)
    for r in rows:
        d = r["grpo_minus_control"]
        ci = "[{:+.1f}, {:+.1f}]".format(*d["ci95"]) if d["ci95"] else ""
        print(f"{r['facet']}={r['value'][:40]:<40} n={r['heldout_tasks']:>4}  start "
              f"{r['start']:5.1f}  GRPO {r['grpo']:5.1f}  control {r['control']:5.1f}  "
              f"GRPO - control {d['mean']:+5.1f} {ci}", file=sys.stderr)  # fmt: skip
    emit(
        {
            "benchmark": "where_grpo_pays",
            "command": " ".join(
                ["python benchmarks/lifecycle/where_grpo_pays/where_grpo_pays.py", *sys.argv[1:]]
            ),
            "runs": [{"run": run.name, "seed": _seed(run)} for run in args.runs],
            "slices": rows,
            "wall_s": round(time.time() - started, 1),
            **machine(load),
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
