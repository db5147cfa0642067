"""Heavy verification on Ray actors vs the local process pool: the hop and math throughput.

    python benchmarks/scale/ray_verify/ray_verify.py [--workers 2] [--tasks 40] [--rounds 3] [--json] [--out FILE]

``math`` (``heavy_verify``) through the pools the resources server uses, called directly (no
HTTP): :class:`~gymflow.env.verify_pool.VerifyPool` (``verify_on="local"``: spawned
processes) and :class:`~gymflow.env.ray_verify.RayVerifyPool` (``"ray"``: actors on a local
cluster started here), each with ``--workers`` workers, started and warmed up before timing.

* ``hop_ms`` — one verification at a time of an empty answer (math-verify returns at once):
  what sending a call to a worker and back costs, median of 200 calls; ``inline`` is the same
  verification in this process, for scale.
* ``math_per_s`` — the gold answer and every probe of ``--tasks`` tasks (17 trajectories a
  task), all submitted at once: verifications/s, the median of ``--rounds`` rounds; ``inline``
  verifies them one after another in this process. ``server_cpu_ms``: CPU of this process (the
  server's side: dispatching, waiting, results) per verification, so ``1000 / server_cpu_ms``
  is where one server process stops sending work to more workers.

Start-up (``start_s``: the local cluster once, each pool's workers up with ``math`` built) is
reported beside them. The load average before and after says how busy the machine was.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.verify_pool import VerifyPool

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402


def trajectories(env, n_tasks: int) -> list[tuple]:
    out = []
    for task in build_tasks(env, n_tasks, 7, 0.0, 0.0):
        for text in [env.gold_text(task)] + [p.text for p in env.probes(task)]:
            out.append((task, prompt_items(task.prompt) + assistant_items(text, 0)))
    return out


async def measure(pool: VerifyPool, hop: tuple, batch: list[tuple], rounds: int) -> dict:
    started = time.perf_counter()
    await asyncio.gather(*(pool.verify(*hop) for _ in range(pool.workers * 2)))  # all up
    start_s = time.perf_counter() - started
    hops = []
    for _ in range(200):
        t = time.perf_counter()
        await pool.verify(*hop)
        hops.append(time.perf_counter() - t)
    per_s, cpu_ms, rewards = [], [], None
    for _ in range(rounds):
        t, cpu = time.perf_counter(), time.process_time()
        scores = await asyncio.gather(*(pool.verify(task, items) for task, items in batch))
        per_s.append(len(batch) / (time.perf_counter() - t))
        cpu_ms.append((time.process_time() - cpu) * 1e3 / len(batch))
        rewards = [s["reward"] for s in scores]
    return {
        "start_s": round(start_s, 2),
        "hop_ms": round(statistics.median(hops) * 1e3, 3),
        "math_per_s": round(statistics.median(per_s), 1),
        "math_per_s_runs": [round(x, 1) for x in per_s],
        "server_cpu_ms": round(statistics.median(cpu_ms), 3),
        "rewards": rewards,
    }


def inline(env, hop: tuple, batch: list[tuple]) -> dict:
    hops = []
    for _ in range(200):
        t = time.perf_counter()
        env.verify(*hop)
        hops.append(time.perf_counter() - t)
    t = time.perf_counter()
    rewards = [env.verify(task, items).reward for task, items in batch]
    return {
        "hop_ms": round(statistics.median(hops) * 1e3, 3),
        "math_per_s": round(len(batch) / (time.perf_counter() - t), 1),
        "rewards": rewards,
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.workers, args.tasks, args.rounds = 1, 4, 1
    load_before = os.getloadavg()

    from gymflow.core.ray_cluster import ray_cluster
    from gymflow.env.ray_verify import RayVerifyPool

    env = get_env("math")
    batch = trajectories(env, args.tasks)
    task = batch[0][0]
    hop = (task, prompt_items(task.prompt) + assistant_items("", 0))
    result = {"env": "math", "workers": args.workers, "trajectories": len(batch)}
    result["inline"] = inline(env, hop, batch)
    local = VerifyPool(env, args.workers)
    try:
        result["local_pool"] = asyncio.run(measure(local, hop, batch, args.rounds))
    finally:
        local.shutdown()
    with ray_cluster(None, num_cpus=max(args.workers, os.cpu_count() or 1)) as cluster:
        result["cluster_start_s"] = cluster.start_s
        on_ray = RayVerifyPool(env, args.workers)
        try:
            result["ray_actors"] = asyncio.run(measure(on_ray, hop, batch, args.rounds))
        finally:
            on_ray.shutdown()
    expected = result["inline"]["rewards"]
    for name in ("local_pool", "ray_actors"):
        assert result[name].pop("rewards") == expected, f"{name} scored otherwise than inline"
    result["same_rewards_as_inline"] = True
    result["inline"].pop("rewards")
    result.update(machine(load_before))
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
