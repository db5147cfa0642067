"""Environment runtime benchmark: request cost, rollout throughput, start-up times.

    python benchmarks/env/env_server/env_server.py [--json] [--out FILE]

Prints one JSON object (``--json``) with:

* ``trivial_cpu_ms_http`` — server CPU per ``GET /health`` over HTTP (``gymflow env serve`` in
  its own process; CPU read from /proc, so client cost is excluded);
* ``trivial_cpu_ms_inproc`` — CPU per ``GET /health`` in-process (ASGI transport; client and
  server share the process, so this includes the client's side);
* ``rollouts_per_s_inproc`` / ``rollouts_per_s_http`` — complete ``counter`` episodes
  (3 tool calls on 2 stateful tools + a final answer, seeded, verified and closed) with a
  scripted policy that answers instantly, many episodes concurrently;
* ``rollouts_per_s_http_workers2`` — the same over ``gymflow env serve --workers 2`` (sessions
  spread over both processes, each call sent to its session's worker);
* ``sessions_10k_mb_live`` / ``sessions_10k_mb_after_close`` — Python heap (tracemalloc) held
  by 10,000 live ``counter`` sessions in one server, and what stays after closing them all
  (the bounded memory of ended ids);
* ``import_s`` — wall time of ``gymflow --help`` in a fresh process (best of 3);
* ``serve_ready_s`` — from spawning ``gymflow env serve`` to the first ``/health`` answer.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import httpx

from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, start_server  # noqa: E402

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def trivial_http(url: str, pid: int, n: int) -> float:
    with httpx.Client(base_url=url) as client:
        for _ in range(200):
            client.get("/health")
        before = _proc_cpu_s(pid)
        for _ in range(n):
            client.get("/health")
        return (_proc_cpu_s(pid) - before) / n * 1000


def trivial_inproc(n: int) -> float:
    app = build_app(get_env("counter"))

    async def go() -> float:
        async with EnvClient(app=app) as client:
            for _ in range(200):
                await client.request("GET", "/health")
            before = time.process_time()
            for _ in range(n):
                await client.request("GET", "/health")
            return (time.process_time() - before) / n * 1000

    return asyncio.run(go())


def rollouts_per_s(client_factory, n: int, concurrency: int) -> float:
    env = get_env("counter")
    tasks = build_tasks(env, n, seed=1, heldout_frac=0.0, val_frac=0.0)
    turns = {t.task_id: env.gold_turns(t) for t in tasks}
    sampling = Sampling(max_completion_tokens=1 << 20)

    async def one(client, sem, task):
        policy = ScriptedPolicy.replay(turns[task.task_id])
        async with sem:
            (ep,) = await run_episodes(client, env, policy, [task], sampling, [0])
        if ep.reward != 1.0:
            raise AssertionError(f"gold episode scored {ep.reward}: {ep.score}")

    async def go() -> float:
        sem = asyncio.Semaphore(concurrency)
        async with client_factory() as client:
            started = time.perf_counter()
            await asyncio.gather(*(one(client, sem, t) for t in tasks))
            return len(tasks) / (time.perf_counter() - started)

    return asyncio.run(go())


def session_memory_mb(n: int = 10_000) -> tuple[float, float]:
    """Heap held by ``n`` live sessions, and what stays after closing them (server side only:
    each phase runs in its own event loop, so the client's finished tasks are gone)."""
    import gc

    env = get_env("counter")
    tasks = build_tasks(env, 200, seed=9, heldout_frac=0.0, val_frac=0.0)
    app = build_app(env)

    async def seed() -> list[str]:
        async with EnvClient(app=app) as client:
            return await asyncio.gather(
                *(client.seed_session(tasks[i % len(tasks)]) for i in range(n))
            )

    async def close(sids: list[str]) -> None:
        async with EnvClient(app=app) as client:
            await asyncio.gather(*(client.close_session(s) for s in sids))

    def heap() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        asyncio.run(close([asyncio.run(seed())[0]]))  # warm up: first-use caches
        base = heap()
        sids = asyncio.run(seed())
        live = heap() - sys.getsizeof(sids) - sum(map(sys.getsizeof, sids))  # ids we hold
        asyncio.run(close(sids))
        del sids
        after = heap()
    finally:
        tracemalloc.stop()
    return (live - base) / 2**20, (after - base) / 2**20


def import_time() -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([GYMFLOW, "--help"], check=True, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rollouts", type=int, default=800)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.requests, args.rollouts, args.concurrency = 40, 16, 4

    proc, url, ready_s = start_server("counter")
    try:
        result = {
            "trivial_cpu_ms_http": trivial_http(url, proc.pid, args.requests),
            "trivial_cpu_ms_inproc": trivial_inproc(args.requests),
            "rollouts_per_s_inproc": rollouts_per_s(
                lambda: EnvClient(app=build_app(get_env("counter"))),
                args.rollouts,
                args.concurrency,
            ),
            "rollouts_per_s_http": rollouts_per_s(
                lambda: EnvClient(base_url=url), args.rollouts, args.concurrency
            ),
            "serve_ready_s": ready_s,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    proc2, url2, _ = start_server("counter", workers=2)
    try:
        result["rollouts_per_s_http_workers2"] = rollouts_per_s(
            lambda: EnvClient(base_url=url2), args.rollouts, args.concurrency
        )
    finally:
        proc2.terminate()
        proc2.wait(timeout=10)
    live_mb, after_mb = session_memory_mb(200 if args.smoke else 10_000)
    result["sessions_10k_mb_live"], result["sessions_10k_mb_after_close"] = live_mb, after_mb
    result["import_s"] = import_time()
    result = {k: round(v, 4) for k, v in result.items()}
    result.update(
        {
            "env": "counter",
            "episode": "3 tool calls (2 tools) + answer, scripted policy; verify closes the session",
            "requests": args.requests,
            "rollouts": args.rollouts,
            "concurrency": args.concurrency,
            "machine": f"{os.cpu_count()} CPU cores",
            "date": time.strftime("%Y-%m-%d"),
        }
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
