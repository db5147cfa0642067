"""Math verifier benchmark: CPU milliseconds per ``verify`` call, p50 / p95 / max, as JSON.

    python benchmarks/env/math_env/math_env.py [--per-source N] [--out FILE]

CPU is the process's CPU time (``time.process_time``: the verifying thread and the CPU-limit
watchdog thread each call starts, about 0.1 ms of the total), so a busy machine does not
inflate it. Replies, per task of each source (GSM8K test, MATH-500, generated):

* ``gold_first`` — the gold text, first time the task is seen (parses the gold answer; a
  process pool worker pays this once per task, then it is cached);
* ``gold`` — the gold text again (the usual cost of a right answer);
* ``wrong`` — a boxed wrong answer (parse + a full comparison: the usual wrong answer);
* ``probes`` — every adversarial probe of :mod:`environments.math.probes` (refusals are
  cheap; a few comparisons of long candidate lists are the slow end).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.environments.math import MathEnvironment
from gymflow.environments.math.equivalence import CPU_LIMIT_S
from gymflow.environments.math.loaders import source_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402


def _cpu_ms(env: MathEnvironment, task, text: str) -> float:
    items = prompt_items(task.prompt) + assistant_items(text, 0)
    start = time.process_time()
    env.verify(task, items)
    return (time.process_time() - start) * 1000


def _summary(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 2),
        "p95_ms": round(values[int(0.95 * (len(values) - 1))], 2),
        "max_ms": round(values[-1], 2),
    }


def measure(per_source: int) -> dict:
    env = MathEnvironment()
    sources = {
        "gsm8k": list(source_tasks("gsm8k"))[:per_source],
        "math500": list(source_tasks("math500"))[:per_source],
        "generated": build_tasks(env, per_source, seed=1, heldout_frac=0.0, val_frac=0.0),
    }
    result: dict = {}
    for name, tasks in sources.items():
        times: dict[str, list[float]] = {"gold_first": [], "gold": [], "wrong": [], "probes": []}
        for task in tasks:
            gold = env.gold_text(task)
            times["gold_first"].append(_cpu_ms(env, task, gold))
            times["gold"].append(_cpu_ms(env, task, gold))
            probes = env.probes(task)
            wrong = next(p for p in probes if p.name == "wrong_answer")
            times["wrong"].append(_cpu_ms(env, task, wrong.text))
            times["probes"] += [_cpu_ms(env, task, p.text) for p in probes]
        result[name] = {kind: _summary(values) for kind, values in times.items()}
    return result


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--per-source", type=int, default=100, help="tasks per source")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.per_source = 3
    started = time.perf_counter()
    result = {
        "verify_cpu_ms": measure(args.per_source),
        "cpu_limit_s": CPU_LIMIT_S,
        "wall_s": round(time.perf_counter() - started, 1),
        "machine": f"{os.cpu_count()} CPU cores, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
    }
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
