"""Load: 10,000 concurrent sessions over HTTP against one server and against replicas.

    python benchmarks/env/load/load.py [--sessions 10000] [--in-flight 256] [--json] [--out FILE]

For each layout (``gymflow env serve counter`` as one process, then ``--workers 2``) a real
server runs on 127.0.0.1 and the project's HTTP client (aiohttp, session affinity) drives it in
waves. A wave seeds ``--sessions`` sessions and keeps every one of them open (all live at once),
then plays each session's gold episode (three tool calls) and verifies it with ``close``; at most
``--in-flight`` requests are outstanding. The first wave warms the server up (imports, caches,
allocator arenas); the second is measured. Reported per layout:

* ``seed_ms`` / ``tool_ms`` / ``verify_ms`` — p50 and p99 latency of each request kind, as the
  client sees it under that load (queueing included);
* ``requests_per_s`` — requests of the measured wave over its wall time;
* ``rss_mb`` — the server's resident memory (all its processes, from ``/proc``): ``start``
  (fresh), ``warm`` (after the warm-up wave), ``peak_live`` (every session of the measured wave
  open), ``after`` (the measured wave closed); ``after_vs_warm`` and ``after_vs_start`` are
  ``after`` over those baselines;
* ``errors`` — requests that failed (any kind); ``rewards`` — gold verifies that did not score 1.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.core.watchdog import descendants
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.registry import get_env

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import (  # noqa: E402
    arguments,
    emit,
    start_server,  # noqa: E402
)

ENV = "counter"


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MiB."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        line = next((ln for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
        total += int(line.split()[1]) if line else 0
    return total / 1024


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50": round(statistics.median(ordered), 2), "p99": round(p99, 2)}


async def wave(url: str, tasks: list, sessions: int, in_flight: int, on_all_live) -> dict:
    """Seed ``sessions`` sessions, hold them all, then play and verify (close) each gold episode."""
    env = get_env(ENV)
    latency: dict[str, list[float]] = {"seed": [], "tool": [], "verify": []}
    errors = wrong = 0
    gate = asyncio.Semaphore(in_flight)

    async def timed(kind: str, call):
        nonlocal errors
        async with gate:
            started = time.perf_counter()
            try:
                return await call
            except Exception:  # counted: a load test reports failures rather than stopping
                errors += 1
                return None
            finally:
                latency[kind].append((time.perf_counter() - started) * 1000)

    async with EnvClient(base_url=url, max_connections=in_flight, timeout_s=120) as client:
        chosen = [tasks[i % len(tasks)] for i in range(sessions)]
        started = time.perf_counter()
        sids = await asyncio.gather(*(timed("seed", client.seed_session(t)) for t in chosen))
        on_all_live()

        async def finish(sid: str | None, task) -> None:
            nonlocal wrong
            if sid is None:
                return
            items = prompt_items(task.prompt)
            for turn, text in enumerate(env.gold_turns(task)):
                for item in assistant_items(text, turn):
                    items.append(item)
                    if item["type"] != "function_call":
                        continue
                    args = json.loads(item["arguments"])
                    result = await timed("tool", client.call_tool(sid, item["name"], args))
                    output = json.dumps(result["output"] if result else None)
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": item["call_id"],
                            "output": output,
                        }
                    )
            scored = await timed("verify", client.verify(sid, items, close=True))
            if scored is not None and scored.get("reward") != 1.0:
                wrong += 1

        await asyncio.gather(*(finish(s, t) for s, t in zip(sids, chosen, strict=True)))
        wall = time.perf_counter() - started
    n_requests = sum(len(v) for v in latency.values())
    return {
        **{f"{kind}_ms": _percentiles(values) for kind, values in latency.items()},
        "requests_per_s": round(n_requests / wall, 1),
        "errors": errors,
        "rewards": wrong,
    }


def layout(workers: int, sessions: int, in_flight: int) -> dict:
    env = get_env(ENV)
    tasks = build_tasks(env, 500, seed=3, heldout_frac=0.0, val_frac=0.0)
    proc, url, _ = start_server(ENV, workers)
    try:
        time.sleep(1)
        memory = {"start": rss_mb(proc.pid)}
        asyncio.run(wave(url, tasks, sessions, in_flight, lambda: None))
        time.sleep(1)
        memory["warm"] = rss_mb(proc.pid)

        def at_peak() -> None:
            memory["peak_live"] = rss_mb(proc.pid)

        measured = asyncio.run(wave(url, tasks, sessions, in_flight, at_peak))
        time.sleep(1)
        memory["after"] = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    memory = {k: round(v, 1) for k, v in memory.items()}
    memory["after_vs_warm"] = round(memory["after"] / memory["warm"], 3)
    memory["after_vs_start"] = round(memory["after"] / memory["start"], 3)
    return {"workers": workers, "sessions": sessions, **measured, "rss_mb": memory}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.sessions, args.in_flight, args.workers = 40, 8, [1]
    result = {f"workers_{n}": layout(n, args.sessions, args.in_flight) for n in args.workers}
    emit(result, args.out, args.json)


if __name__ == "__main__":
    main()
