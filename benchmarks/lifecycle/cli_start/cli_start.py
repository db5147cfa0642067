"""How fast the command line answers: median wall seconds of ``gymflow --help`` and of one
subcommand's ``--help``, each a fresh process, as JSON.

    python benchmarks/lifecycle/cli_start/cli_start.py [--runs 15] [--subcommand run] [--out FILE]

Each measurement runs the installed ``gymflow`` script (beside this Python) with ``--help``
and waits for it to exit; the first run of each is a warm-up (disk cache) and not counted.
Commands are imported only when they run (``cli/lazy_group.py``), so ``gymflow --help``
imports typer and the command table, nothing of the library. Also reported: the modules a
``gymflow --help`` process imports that a bare ``python -c pass`` does not (so an import that
creeps back in shows by name). Target: ``gymflow --help`` median <= 0.3 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402

TARGET_S = 0.3
GYMFLOW = Path(sys.executable).with_name("gymflow")
HEAVY = ("pandas", "pandera", "polars", "pydantic", "torch", "prefect", "mlflow", "rich")


def timed(command: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``command`` (after one uncounted warm-up)."""
    times = []
    for i in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{command} failed: {done.stderr.decode()[-500:]}")
        if i:
            times.append(elapsed)
    return times


def heavy_imports() -> list[str]:
    """Top-level packages of :data:`HEAVY` that ``gymflow --help`` imports."""
    probe = (
        "import sys, runpy; sys.argv = ['gymflow', '--help']\n"
        "try:\n    runpy.run_module('gymflow.cli.main', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    loaded = set(done.stderr.split())
    return sorted(loaded & set(HEAVY))


def figures(times: list[float]) -> dict:
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "runs": len(times),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=15, help="measured runs per command")
    parser.add_argument("--subcommand", default="run", help="the subcommand whose --help to time")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.runs = 2
    load_before = os.getloadavg()
    python = timed([sys.executable, "-c", "pass"], args.runs)
    top = timed([str(GYMFLOW), "--help"], args.runs)
    sub = timed([str(GYMFLOW), args.subcommand, "--help"], args.runs)
    result = {
        "benchmark": "cli_start",
        "command": f"python benchmarks/lifecycle/cli_start/cli_start.py --runs {args.runs} "
        f"--subcommand {args.subcommand}",
        "python_startup": figures(python),
        "gymflow_help": figures(top),
        f"gymflow_{args.subcommand}_help": figures(sub),
        "heavy_modules_imported_by_help": heavy_imports(),
        "target_s": TARGET_S,
        "target_met": statistics.median(top) <= TARGET_S,
        **machine(load_before),
    }
    emit(result, args.out, args.json)


if __name__ == "__main__":
    main()
