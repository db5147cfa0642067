"""Rollout collector benchmark: chunks run one after another vs the sliding window.

    python benchmarks/training/collector/collector.py [--json] [--out FILE]

A mixed-latency ``counter``: the same tasks, tools and verifier, but every tool call waits
(``asyncio.sleep``) 2 ms, except for 1 task in 10 where it waits 150 ms — a slow API behind a
tool. Gold episodes (3 tool calls + an answer, scripted policy), 256 rollouts, 32 live.
Scenarios:

* ``instant`` — the scripted policy as is (model cost 0);
* ``model`` — the scripted policy plus a blocking sleep of 20 ms + 0.5 ms per prompt on each
  ``generate`` call, standing in for a batched generation (it holds the event loop as a
  real in-process backend does, so batching still matters);
* ``model_uniform`` — the same with every tool call 2 ms: where chunks lose nothing, the
  window must not lose either (its batches must stay full).

For each, ``rollouts_per_s`` of ``chunked`` (chunks of ``concurrency`` episodes through the one
episode driver, a part file per chunk, each chunk finished before the next starts: how the
engine filled its batches before the sliding window; the per-turn lock-step inside a chunk is
gone from the product, so this baseline is faster than the old engine was) and ``window``
(``collect_rollouts``), and ``speedup``. ``mean_batch`` is the window's mean prompts per
generation call. Mostly sleeping: little CPU.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter import CounterEnvironment
from gymflow.environments.counter import environment as counter
from gymflow.policy.spec import load_policy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.engine import CollectSettings, collect_rollouts, plan_collection
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import Lineage, rollout_row, write_part

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402

FAST_S, SLOW_S, SLOW_EVERY = 0.002, 0.150, 10


class MixedLatencyCounter(CounterEnvironment):
    """``counter`` whose tool calls take FAST_S, or ``slow_s`` for one task in SLOW_EVERY."""

    def __init__(self, slow_s: float = SLOW_S) -> None:
        self.slow_s = slow_s

    def tools(self):
        async def increment_counter(session: counter.Counter, count: int) -> dict:
            """Add to the counter.

            Args:
                count: The amount to add.
            """
            await asyncio.sleep(session.delay)
            return counter.increment_counter(session, count)

        async def get_counter_value(session: counter.Counter) -> dict:
            """Read the counter."""
            await asyncio.sleep(session.delay)
            return counter.get_counter_value(session)

        return [increment_counter, get_counter_value]

    def new_state(self, task):
        state = super().new_state(task)
        slow = zlib.crc32(task.task_id.encode()) % SLOW_EVERY == 0
        state.delay = self.slow_s if slow else FAST_S
        return state


class ModelCost:
    """A scripted policy whose ``generate`` costs what a small batched model's might."""

    def __init__(self, policy, base_s: float = 0.020, per_prompt_s: float = 0.0005) -> None:
        self.policy, self.base_s, self.per_prompt_s = policy, base_s, per_prompt_s

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def generate(self, prompts, *args, **kwargs):
        time.sleep(self.base_s + self.per_prompt_s * len(prompts))
        return self.policy.generate(prompts, *args, **kwargs)


def chunked(env, policy, tasks, settings: CollectSettings, out: Path) -> float:
    """Chunks of ``concurrency`` episodes, each finished before the next starts, a part each."""
    schema = collected_rollouts(settings.num_repeats, env.reward_range)
    lineage = Lineage(settings.run_id, 0, 0, "", env.name, env.version, "x" * 16)
    todo = plan_collection(tasks, settings)

    async def go() -> float:
        async with EnvClient(app=build_app(env)) as client:
            started = time.perf_counter()
            for i in range(0, len(todo), settings.concurrency):
                chunk = todo[i : i + settings.concurrency]
                eps = await run_episodes(
                    client, env, policy, [p.task for p in chunk], settings.sampling,
                    [p.seed for p in chunk],
                )  # fmt: skip
                rows = [rollout_row(lineage, p, ep) for p, ep in zip(chunk, eps, strict=True)]
                assert all(r["reward"] == 1.0 for r in rows), "gold episodes must score 1"
                write_part(rows, out, schema, 0)
            return len(todo) / (time.perf_counter() - started)

    return asyncio.run(go())


def window(env, policy, tasks, settings: CollectSettings, out: Path) -> tuple[float, float]:
    async def go():
        async with EnvClient(app=build_app(env)) as client:
            return await collect_rollouts(env, client, policy, tasks, out, settings)

    report = asyncio.run(go())
    assert report.failures == {} and report.collected == len(tasks) * settings.num_repeats
    return len(tasks) * settings.num_repeats / report.wall_s, report.mean_batch


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.tasks, args.repeats, args.concurrency = 4, 1, 4
    env = MixedLatencyCounter()
    tasks = build_tasks(env, args.tasks * 4, seed=3, heldout_frac=0.0, val_frac=0.0)
    # one task per prompt (the scripted gold policy finds a task by its prompt)
    tasks = list({t.prompt[0]["content"]: t for t in tasks}.values())[: args.tasks]
    settings = CollectSettings(
        run_id="bench", num_repeats=args.repeats, concurrency=args.concurrency,
        sampling=Sampling(max_completion_tokens=1 << 20), reward_range=env.reward_range,
        progress=False,
    )  # fmt: skip
    gold = load_policy("scripted:counter", tasks=tasks)
    result: dict = {}
    scenarios = [
        ("instant", gold, MixedLatencyCounter()),
        ("model", ModelCost(gold), MixedLatencyCounter()),
        ("model_uniform", ModelCost(gold), MixedLatencyCounter(slow_s=FAST_S)),
    ]
    for name, policy, env in scenarios:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            before = chunked(env, policy, tasks, settings, Path(a))
            after, batch = window(env, policy, tasks, settings, Path(b))
        result[name] = {
            "chunked_rollouts_per_s": round(before, 1),
            "window_rollouts_per_s": round(after, 1),
            "speedup": round(after / before, 2),
            "window_mean_batch": batch,
        }
    slow = sum(zlib.crc32(t.task_id.encode()) % SLOW_EVERY == 0 for t in tasks)
    result.update(
        {
            "env": f"counter, tool calls {FAST_S * 1000:g} ms ({slow} of {len(tasks)} tasks: "
            f"{SLOW_S * 1000:g} ms)",
            "rollouts": len(tasks) * args.repeats,
            "concurrency": args.concurrency,
            "model_cost": "20 ms + 0.5 ms per prompt per generate call (blocking sleep)",
            "machine": f"{os.cpu_count()} CPU cores",
            "date": time.strftime("%Y-%m-%d"),
        }
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
