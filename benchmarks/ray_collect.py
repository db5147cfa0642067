"""Collection on Ray vs the local engine: rollouts/s for 1, 2, 4 Ray workers on one machine.

    python benchmarks/ray_collect.py [--workers 1,2,4] [--json] [--out FILE]

Gold episodes of ``counter`` (2 increments + a read: 3 tool calls and an answer, scripted
policy), every worker a window of ``--concurrency`` episodes, the environment in-process in
each worker. Three environments:

* ``env_latency`` — every tool call waits 50 ms (``asyncio.sleep``: a slow API behind the tool;
  little CPU): what more workers buy when episodes wait on the environment;
* ``env_cpu`` — every tool call burns 4 ms of CPU on the event loop (a CPU-heavy tool or
  verifier): one process uses one core at most, so this is where workers in several processes
  are needed, and where a 2-core machine stops them scaling;
* ``instant`` — ``counter`` as is: what a rollout costs the engines themselves (for Ray: the
  collecting process receives, builds, validates and writes every row, which bounds it).

For each: ``local`` (the local engine, one process, window ``concurrency``), ``local_window_xN``
(one process, window N × concurrency: as many episodes live as N workers have), and ``ray_N``
(N Ray workers). ``rollouts_per_s`` counts the collection only (planning, episodes, Parquet
writes); the Ray cluster's start-up (``cluster_start_s``, once) and each set of workers' start
(``workers_start_s``) are reported beside it. ``efficiency_2`` = ray_2 / (2 × ray_1).
The machine's load average is printed before and after: on a shared machine the figures move.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from gymflow.data.task_set import build_tasks
from gymflow.environments.counter import environment as counter
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.policy.spec import load_policy
from gymflow.rollout.engine import CollectSettings, collect
from gymflow.rollout.episode import Sampling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import arguments, emit, machine  # noqa: E402

LATENCY_S, CPU_S = 0.050, 0.004


class CostlyCounter(CounterEnvironment):
    """``counter`` whose tool calls wait ``sleep_s`` and then burn ``cpu_s`` of CPU."""

    def __init__(self, sleep_s: float = 0.0, cpu_s: float = 0.0) -> None:
        self.sleep_s, self.cpu_s = sleep_s, cpu_s

    def tools(self):
        sleep_s, cpu_s = self.sleep_s, self.cpu_s

        async def cost() -> None:
            if sleep_s:
                await asyncio.sleep(sleep_s)
            until = time.thread_time() + cpu_s
            while time.thread_time() < until:
                pass

        async def increment_counter(session: counter.Counter, count: int) -> dict:
            """Add to the counter.

            Args:
                count: The amount to add.
            """
            await cost()
            return counter.increment_counter(session, count)

        async def get_counter_value(session: counter.Counter) -> dict:
            """Read the counter."""
            await cost()
            return counter.get_counter_value(session)

        return [increment_counter, get_counter_value]


def run_local(env, tasks, settings: CollectSettings) -> float:
    gold = load_policy(settings.policy_spec, tasks=tasks)
    with tempfile.TemporaryDirectory() as out:
        report = collect(env, gold, tasks, Path(out), settings)
    return _checked(report, tasks, settings)


def run_ray(env, tasks, settings: CollectSettings, workers: int) -> tuple[float, float]:
    from gymflow.rollout.ray_engine import RayWorkers

    with tempfile.TemporaryDirectory() as out, RayWorkers(env, tasks, settings, workers) as runner:
        report = collect(env, None, tasks, Path(out), settings, runner=runner)
    return _checked(report, tasks, settings), runner.workers_start_s


def _checked(report, tasks, settings: CollectSettings) -> float:
    expected = len(tasks) * settings.num_repeats
    assert report.collected == expected and not report.failures, report.as_dict()
    return round(expected / report.wall_s, 1)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--workers", default="1,2,4", help="Ray worker counts, comma-separated")
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    from gymflow.core.ray_cluster import ray_cluster

    base = CounterEnvironment()
    tasks = build_tasks(base, args.tasks * 4, seed=3, heldout_frac=0.0, val_frac=0.0)
    # one task per prompt (the scripted gold policy finds a task by its prompt)
    tasks = list({t.prompt[0]["content"]: t for t in tasks}.values())[: args.tasks]
    settings = CollectSettings(
        run_id="bench", num_repeats=args.repeats, concurrency=args.concurrency,
        policy_spec="scripted:counter", sampling=Sampling(max_completion_tokens=1 << 20),
        reward_range=base.reward_range, progress=False,
    )  # fmt: skip
    load_before = os.getloadavg()
    result: dict = {}
    with ray_cluster(None, num_cpus=max(counts)) as cluster:
        for name, env in (
            ("env_latency", CostlyCounter(sleep_s=LATENCY_S)),
            ("env_cpu", CostlyCounter(cpu_s=CPU_S)),
            ("instant", CostlyCounter()),
        ):
            row: dict = {"local": run_local(env, tasks, settings)}
            for n in counts:
                if n > 1:
                    wide = replace(settings, concurrency=n * args.concurrency)
                    row[f"local_window_x{n}"] = run_local(env, tasks, wide)
            for n in counts:
                row[f"ray_{n}"], row[f"ray_{n}_workers_start_s"] = run_ray(env, tasks, settings, n)
            if 1 in counts and 2 in counts:
                row["efficiency_2"] = round(row["ray_2"] / (2 * row["ray_1"]), 2)
            result[name] = row
            print(name, row, file=sys.stderr, flush=True)
    result.update(
        {
            "rollouts": len(tasks) * args.repeats,
            "concurrency_per_worker": args.concurrency,
            "environments": {
                "env_latency": f"counter, every tool call waits {LATENCY_S * 1000:g} ms",
                "env_cpu": f"counter, every tool call burns {CPU_S * 1000:g} ms of CPU",
                "instant": "counter as is: the engines' own cost per rollout",
            },
            "cluster_start_s": cluster.start_s,
            **machine(load_before),
        }
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
