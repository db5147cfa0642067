"""Code sandbox benchmark: start-up of a sandboxed interpreter, and the cost of one verify.

    python benchmarks/env/code_env/code_env.py [--isolation auto|bwrap|unshare|none] [--n 40]
        [--kernel-layer on|off] [--out FILE]

Prints one JSON object with, per run of the chosen tier:

* ``startup_ms`` — p50 / p95 wall time to launch one sandboxed interpreter that does nothing
  (``<launcher> python -I -S -c pass``): the floor under every verify;
* ``verify_wall_ms`` — p50 / p95 wall time of the code environment's ``verify`` on gold
  answers of the first ``n`` HumanEval tasks, one at a time (two sandboxed interpreters per
  verify, started together, plus the tests);
* ``verify_cpu_ms`` — p50 / p95 CPU of the same: the host's own (this process) plus both
  sandboxed interpreters as they report it (``getrusage`` inside, start-up included); the
  launcher's own CPU (bwrap, unshare) is not in it;
* ``kernel_layer`` — the Landlock ABI and whether the seccomp filter was loaded
  (``--kernel-layer off`` leaves both out, to price them: never a setting for real use);
* ``load_avg_1m`` — the machine's load when the run started (figures from a busy machine are
  slower; compare runs taken at similar load).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gymflow.environments.code import kernel_layer, sandbox
from gymflow.environments.code.execution import Program, run_program
from gymflow.environments.code.humaneval import load_tasks
from gymflow.environments.code.probes import gold_code
from gymflow.environments.code.sandbox import Interpreter, Limits

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402


def _percentiles(values: list[float]) -> dict:
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return {"p50": round(statistics.median(values), 2), "p95": round(cuts[18], 2)}


def startup_ms(tier: str, n: int) -> list[float]:
    argv = [*sandbox.launch_command(tier, Interpreter.current(), Limits()), "-c", "pass"]
    times = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd="/")
        times.append((time.perf_counter() - started) * 1000)
    return times


def verify_costs(tier: str, n: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for task in load_tasks()[:n]:
        truth = task.ground_truth
        program = Program(gold_code(truth), truth["prompt"], truth["test"], truth["entry_point"])
        wall0, cpu0 = time.perf_counter(), time.process_time()
        outcome = run_program(program, Limits(), tier)
        host_cpu = time.process_time() - cpu0
        walls.append((time.perf_counter() - wall0) * 1000)
        cpus.append((host_cpu + outcome.cpu_s) * 1000)
        if outcome.verdict != "passed":
            raise RuntimeError(f"gold failed on {task.task_id}: {outcome}")
    return walls, cpus


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--n", type=int, default=40, help="HumanEval tasks to verify")
    parser.add_argument("--kernel-layer", choices=("on", "off"), default="on")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.n = 2
    tier = sandbox.resolve(args.isolation)
    if args.kernel_layer == "off":  # the price of Landlock + seccomp, measured by leaving them out
        os.environ[kernel_layer.INSECURE_ENV] = "1"
        kernel_layer.layer = lambda _tier: kernel_layer.KernelLayer(0, None, ("off",))
    layer = kernel_layer.require(tier)
    load = os.getloadavg()[0]
    startup_ms(tier, 3)  # warm the page cache
    starts = startup_ms(tier, args.n)
    walls, cpus = verify_costs(tier, args.n)
    result = {
        "isolation": tier,
        "n": args.n,
        "startup_ms": _percentiles(starts),
        "verify_wall_ms": _percentiles(walls),
        "verify_cpu_ms": _percentiles(cpus),
        "kernel_layer": {"landlock_abi": layer.landlock_abi, "seccomp": bool(layer.seccomp)},
        "load_avg_1m": round(load, 2),
        "cpus": os.cpu_count(),
    }
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
