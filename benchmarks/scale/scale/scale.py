"""Scaling out on Ray: rollouts/s of a collection, local vs 1, 2, 4 Ray workers, on this machine.

    python benchmarks/scale/scale/scale.py [--workers 1,2,4] [--rounds 3] [--envs env_latency,...]
        [--small-parts] [--json] [--out FILE]

Gold episodes of ``counter`` (2 increments + a read: 3 tool calls and an answer, scripted
policy), every worker a window of ``--concurrency`` episodes, the environment in-process in
each worker, collected through the product's own path (``collect_on_ray``: the one store, parts
as large as the windows of every worker). Three environments:

* ``env_latency`` — every tool call waits 50 ms (``asyncio.sleep``: a slow API behind the tool;
  little CPU): episodes wait on the environment, the case Ray workers are for (the issue's
  measure: efficiency at 2 workers);
* ``env_cpu`` — every tool call burns 4 ms of CPU on the event loop (a CPU-heavy tool or
  verifier): one process uses one core at most, so this is where workers in several processes
  are needed, and where a 2-core machine stops them scaling;
* ``instant`` — ``counter`` as is: what a rollout costs the engines themselves (for Ray: the
  collecting process receives, builds, validates and writes every row, which bounds it).

For each: ``local`` (the local engine, one process, window ``concurrency``), ``local_window_xN``
(one process, window N × concurrency: as many episodes live as N workers have), and ``ray_N``
(N Ray workers), each the median of ``--rounds`` runs (every run in ``runs``).
``rollouts_per_s`` counts the collection only (planning, episodes, Parquet writes); the Ray
cluster's start-up (``cluster_start_s``, once) and each set of workers' start
(``workers_start_s``: actors up, policy and env client loaded) are reported beside it, with
the CPU seconds the collecting process and the workers spent per rollout (``cpu_ms``).
``efficiency_2`` = ray_2 / (2 × ray_1). ``--small-parts`` adds ``ray_N_small_parts``: the
collecting process writing a part per worker window (16 rows) instead of per every worker's. The machine's load average is printed before and
after: on a shared machine the figures move.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402

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


def run_local(env, tasks, settings: CollectSettings) -> dict:
    gold = load_policy(settings.policy_spec, tasks=tasks)
    before = os.times()
    with tempfile.TemporaryDirectory() as out:
        report = collect(env, gold, tasks, Path(out), settings)
    return {"rollouts_per_s": _checked(report, tasks, settings), **_cpu(before, None, report)}


def run_ray(env, tasks, settings: CollectSettings, workers: int, small_parts=False) -> dict:
    """N Ray workers through the product's path; ``small_parts``: parts of one worker's window
    (what the engine wrote before they held every worker's), for comparison."""
    from gymflow.rollout.ray_engine import RayWorkers

    with tempfile.TemporaryDirectory() as out, RayWorkers(env, tasks, settings, workers) as runner:
        pids, before = runner.pids(), os.times()
        spent = _process_cpu(pids)
        if small_parts:
            report = collect(env, None, tasks, Path(out), settings, runner=runner)
        else:
            report = runner.collect(env, tasks, Path(out))
        spent = _process_cpu(pids) - spent
    return {
        "rollouts_per_s": _checked(report, tasks, settings),
        "workers_start_s": runner.workers_start_s,
        **_cpu(before, spent, report),
    }


def _process_cpu(pids: list[int]) -> float:
    import psutil

    times = [psutil.Process(pid).cpu_times() for pid in pids]
    return sum(t.user + t.system for t in times)


def _cpu(before: os.times_result, workers_s: float | None, report) -> dict:
    """CPU milliseconds per rollout: this (collecting) process's, and the workers' together."""
    after = os.times()
    here = after.user + after.system - before.user - before.system
    cpu = {"collecting_process": round(here * 1000 / report.collected, 2)}
    if workers_s is not None:
        cpu["workers"] = round(workers_s * 1000 / report.collected, 2)
    return {"cpu_ms": cpu}


def _checked(report, tasks, settings: CollectSettings) -> float:
    expected = len(tasks) * settings.num_repeats
    assert report.collected == expected and not report.failures, report.as_dict()
    return round(expected / report.wall_s, 1)


def _median(runs: list[dict]) -> dict:
    """The run of median rollouts/s (all runs' rollouts/s beside it)."""
    ranked = sorted(runs, key=lambda r: r["rollouts_per_s"])
    return ranked[len(ranked) // 2] | {"runs": [r["rollouts_per_s"] for r in runs]}


ENVIRONMENTS = {
    "env_latency": (
        lambda: CostlyCounter(sleep_s=LATENCY_S),
        f"counter, every tool call waits {LATENCY_S * 1000:g} ms",
    ),
    "env_cpu": (
        lambda: CostlyCounter(cpu_s=CPU_S),
        f"counter, every tool call burns {CPU_S * 1000:g} ms of CPU",
    ),
    "instant": (CostlyCounter, "counter as is: the engines' own cost per rollout"),
}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--workers", default="1,2,4", help="Ray worker counts, comma-separated")
    parser.add_argument("--envs", default=",".join(ENVIRONMENTS), help="environments to run")
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each; the median is kept")
    parser.add_argument(
        "--small-parts",
        action="store_true",
        help="also ray_N with parts of one worker's window (ray_N_small_parts), for comparison",
    )
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.workers, args.envs, args.tasks, args.repeats, args.rounds = "1", "counter", 4, 1, 1
    counts = [int(n) for n in args.workers.split(",")]
    names = args.envs.split(",")
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
        for name in names:
            env = ENVIRONMENTS[name][0]()
            runs: dict[str, list[dict]] = {}
            for _ in range(args.rounds):  # rounds interleaved: a load spike hits every engine
                runs.setdefault("local", []).append(run_local(env, tasks, settings))
                for n in counts:
                    if n > 1:
                        wide = replace(settings, concurrency=n * args.concurrency)
                        runs.setdefault(f"local_window_x{n}", []).append(
                            run_local(env, tasks, wide)
                        )
                for n in counts:
                    runs.setdefault(f"ray_{n}", []).append(run_ray(env, tasks, settings, n))
                    if args.small_parts:
                        found = run_ray(env, tasks, settings, n, small_parts=True)
                        runs.setdefault(f"ray_{n}_small_parts", []).append(found)
            row = {engine: _median(found) for engine, found in runs.items()}
            for suffix in ("", "_small_parts") if args.small_parts else ("",):
                if 1 in counts and 2 in counts:
                    one = row[f"ray_1{suffix}"]["rollouts_per_s"]
                    two = row[f"ray_2{suffix}"]["rollouts_per_s"]
                    row[f"efficiency_2{suffix}"] = round(two / (2 * one), 2)
            result[name] = row
            print(name, {k: v["rollouts_per_s"] if isinstance(v, dict) else v for k, v in row.items()},
                  os.getloadavg(), file=sys.stderr, flush=True)  # fmt: skip
    result.update(
        {
            "rollouts": len(tasks) * args.repeats,
            "concurrency_per_worker": args.concurrency,
            "rounds": args.rounds,
            "environments": {name: ENVIRONMENTS[name][1] for name in names},
            "cluster_start_s": cluster.start_s,
            **machine(load_before),
        }
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
