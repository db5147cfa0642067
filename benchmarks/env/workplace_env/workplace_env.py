"""Workplace environment cost: CPU per session seed and per verify (NeMo Gym's verify: ~37 ms).

    python benchmarks/env/workplace_env/workplace_env.py [--json] [--out FILE]

Prints one JSON object with CPU milliseconds (``time.process_time``, so waiting is excluded):

* ``seed_state_cpu_ms`` — ``env.new_state(task)``: a fresh copy-on-write sandbox;
* ``seed_request_cpu_ms`` — a whole ``POST /seed_session`` + ``/close_session`` pair through the
  in-process resources server (client side included, as both share the process);
* ``verify_gold_cpu_ms`` — ``env.verify`` on the gold episode of each of the 690 WorkBench
  tasks (one call per turn, with tool outputs, then an answer; the gold outcome is replayed
  every time);
* ``verify_wrong_cpu_ms`` — ``env.verify`` on every adversarial probe of those tasks;
* ``*_p99`` — the 99th percentile of single calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.workplace import WorkplaceEnvironment
from gymflow.environments.workplace.workbench import workbench_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402


def episode_items(env: WorkplaceEnvironment, task) -> list[dict]:
    """The items of a gold episode as the agent loop records them (calls, outputs, answer)."""
    items = prompt_items(task.prompt)
    state = env.new_state(task)
    for turn, text in enumerate(env.gold_turns(task)):
        for item in assistant_items(text, turn):
            items.append(item)
            if item["type"] == "function_call":
                spec = env.tool_specs[item["name"]]
                output = spec.fn(state, **spec.validate(json.loads(item["arguments"])))
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item["call_id"],
                        "output": json.dumps(output),
                    }
                )
    return items


def cpu_ms(fn, cases: list, repeat: int) -> tuple[float, float]:
    """Mean and p99 CPU ms of ``fn(case)`` over ``repeat`` passes of ``cases``."""
    singles = []
    for _ in range(repeat):
        for case in cases:
            before = time.process_time_ns()
            fn(case)
            singles.append((time.process_time_ns() - before) / 1e6)
    singles.sort()
    return statistics.fmean(singles), singles[int(0.99 * (len(singles) - 1))]


def seed_request_ms(env: WorkplaceEnvironment, tasks: list, n: int) -> float:
    app = build_app(env)

    async def go() -> float:
        async with EnvClient(app=app) as client:
            for task in tasks[:50]:  # warm-up
                await client.close_session(await client.seed_session(task))
            before = time.process_time()
            for i in range(n):
                await client.close_session(await client.seed_session(tasks[i % len(tasks)]))
            return (time.process_time() - before) / n * 1000

    return asyncio.run(go())


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="passes over the 690 tasks")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.repeat = 1

    env = WorkplaceEnvironment()
    tasks = workbench_tasks()
    gold = [(t, episode_items(env, t)) for t in tasks]
    probes = [
        (t, prompt_items(t.prompt) + assistant_items(p.text, 0))
        for t in tasks
        for p in env.probes(t)
    ]

    def verify(case) -> None:
        env.verify(*case)

    result = {}
    result["seed_state_cpu_ms"], result["seed_state_cpu_ms_p99"] = cpu_ms(
        env.new_state, tasks, args.repeat * 10
    )
    result["seed_request_cpu_ms"] = seed_request_ms(env, tasks, 2000)
    result["verify_gold_cpu_ms"], result["verify_gold_cpu_ms_p99"] = cpu_ms(
        verify, gold, args.repeat
    )
    result["verify_wrong_cpu_ms"], result["verify_wrong_cpu_ms_p99"] = cpu_ms(
        verify, probes, args.repeat
    )
    result = {k: round(v, 4) for k, v in result.items()}
    result.update(
        {
            "env": "workplace",
            "tasks": len(tasks),
            "probes": len(probes),
            "repeat": args.repeat,
            "machine": f"{os.cpu_count()} CPU cores",
            "date": time.strftime("%Y-%m-%d"),
        }
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
