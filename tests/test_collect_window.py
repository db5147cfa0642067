"""The collector's sliding window: a slow episode holds only itself; turns are still batched."""

from __future__ import annotations

import asyncio
import threading
import time

import polars as pl
import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, TaskDraft
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.engine import ROLLOUTS_DIR, CollectSettings, collect, plan_collection
from gymflow.rollout.episode import Sampling
from gymflow.rollout.store import read_parts

N_TASKS, WINDOW = 12, 4


class LatencyEnv(Environment):
    """Call ``work`` once, then answer "done". Task 0's ``work`` is slow: it returns only once
    every other episode has been verified (or after ``hold_s``, so a design where the others
    wait for it ends instead of hanging). ``events`` logs each episode's start and end."""

    name = "latency_test"
    max_turns = 2
    reward_range = (0.0, 1.0)

    def __init__(self, hold_s: float = 10.0) -> None:
        self.hold_s = hold_s
        self.events: list[tuple[str, str]] = []

    def tools(self):
        async def work(session: dict) -> dict:
            """Do the task's work."""
            if session["slow"]:
                deadline = time.monotonic() + self.hold_s
                while self._fast_ended() < N_TASKS - 1 and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)
            return {"ok": True}

        return [work]

    def _fast_ended(self) -> int:
        return sum(kind == "end" and task != self.slow_id for kind, task in self.events)

    def new_state(self, task):
        self.events.append(("start", task.task_id))
        return {"slow": task.ground_truth["slow"]}

    def generate(self, n, seed):
        return [
            TaskDraft([{"role": "user", "content": f"job {i}"}], {"slow": i == 0}, seed)
            for i in range(n)
        ]

    def verify(self, task, items) -> Score:
        self.events.append(("end", task.task_id))
        answers = [it for it in items if it["type"] == "message" and it["role"] == "assistant"]
        ok = bool(answers) and answers[-1]["content"] == "done"
        return Score(reward=float(ok), success=ok)

    def gold_text(self, task):
        return "done"

    @property
    def slow_id(self) -> str:
        return next(t for t in self._tasks if t.ground_truth["slow"]).task_id

    def make_tasks(self) -> list:
        self._tasks = build_tasks(self, N_TASKS, seed=0, heldout_frac=0.0, val_frac=0.0)
        # the slow task first, so it is in the first window / the first chunk
        return sorted(self._tasks, key=lambda t: not t.ground_truth["slow"])


def worker(prompt: str, turn: int, observations: list[str]) -> str:
    return render_call("work", {}) if turn == 0 else "done"


def settings(**kw) -> CollectSettings:
    base = {"run_id": "w", "num_repeats": 1, "concurrency": WINDOW, "reward_range": (0.0, 1.0)}
    return CollectSettings(**{**base, "sampling": Sampling(max_completion_tokens=1 << 16), **kw})


def during_slow(env: LatencyEnv) -> tuple[int, int]:
    """(episodes started in a freed slot, other episodes ended) while the slow one was live."""
    slow = env.slow_id
    inside = env.events[env.events.index(("start", slow)) + 1 : env.events.index(("end", slow))]
    ends = [i for i, (kind, _) in enumerate(inside) if kind == "end"]
    refills = sum(kind == "start" for kind, _ in inside[ends[0] :]) if ends else 0
    return refills, len(ends)


def test_a_slow_episode_holds_only_itself(tmp_path):
    env = LatencyEnv()
    tasks = env.make_tasks()
    report = collect(env, ScriptedPolicy(worker), tasks, tmp_path, settings())
    assert report.collected == N_TASKS and report.failures == {}
    # the 8 episodes not in the first window started, and all 11 others ended, while the slow
    # one waited in its tool: each finished episode's slot went to the next planned one at once
    assert during_slow(env) == (N_TASKS - WINDOW, N_TASKS - 1)
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.height == N_TASKS and df["reward"].to_list() == [1.0] * N_TASKS
    assert df["rollout_id"].n_unique() == N_TASKS
    # rows were written as they finished: the slow one's row is in the last part
    last = sorted((tmp_path / ROLLOUTS_DIR).glob("part-*.parquet"))[-1]
    assert env.slow_id in pl.read_parquet(last)["task_id"].to_list()


def test_lock_step_chunks_would_hold_the_window(tmp_path):
    """The control: the same env through lock-step chunks (the design the window replaced)
    starts nothing while the slow episode is live; the assertion above tells them apart."""
    env = LatencyEnv(hold_s=0.3)
    tasks = env.make_tasks()
    planned = plan_collection(tasks, settings())

    async def chunks():
        async with EnvClient(app=build_app(env)) as client:
            for i in range(0, len(planned), WINDOW):
                chunk = planned[i : i + WINDOW]
                await run_episodes(
                    client, env, ScriptedPolicy(worker), [p.task for p in chunk],
                    settings().sampling, [p.seed for p in chunk],
                )  # fmt: skip

    asyncio.run(chunks())
    started, ended = during_slow(env)
    assert started == 0 and ended < WINDOW


def test_model_turns_are_batched_across_live_episodes(tmp_path):
    env = LatencyEnv()
    tasks = [t for t in env.make_tasks() if not t.ground_truth["slow"]][:8]
    seen: list[tuple[int, list[int]]] = []

    class Recording(ScriptedPolicy):
        def generate(self, prompts, max_new_tokens, temperature=1.0, greedy=False, seed=None):
            seen.append((len(prompts), seed))
            return super().generate(prompts, max_new_tokens, temperature, greedy, seed)

    report = collect(env, Recording(worker), tasks, tmp_path, settings())
    assert sum(n for n, _ in seen) == 2 * len(tasks)  # two turns per episode
    assert max(n for n, _ in seen) == WINDOW and report.mean_batch > 1
    assert all(len(seeds) == n for n, seeds in seen)  # one seed per prompt
    sent = sorted(s for _, seeds in seen for s in seeds)
    planned = sorted(p.seed + turn for p in plan_collection(tasks, settings()) for turn in (0, 1))
    assert sent == planned  # every turn of every episode sampled with its own seed + turn


def test_one_at_a_time_each_turn_samples_with_its_own_seed(tmp_path):
    env = LatencyEnv()
    tasks = [t for t in env.make_tasks() if not t.ground_truth["slow"]][:3]
    seen: list[list[int]] = []

    class Recording(ScriptedPolicy):
        def generate(self, prompts, max_new_tokens, temperature=1.0, greedy=False, seed=None):
            seen.append(seed)
            return super().generate(prompts, max_new_tokens, temperature, greedy, seed)

    collect(env, Recording(worker), tasks, tmp_path, settings(concurrency=1))
    assert seen == [[p.seed + turn] for p in plan_collection(tasks, settings()) for turn in (0, 1)]


def test_a_generation_error_fails_only_its_episode(tmp_path):
    """A ``GymflowError`` from a batched generate: the batch is retried prompt by prompt."""
    env = LatencyEnv()
    tasks = [t for t in env.make_tasks() if not t.ground_truth["slow"]][:6]
    bad = tasks[2].prompt[0]["content"]

    def flaky(prompt, turn, observations):
        if prompt == bad:
            raise GymflowError(FailureKind.POLICY_UNAVAILABLE, "this prompt breaks the backend")
        return worker(prompt, turn, observations)

    report = collect(env, ScriptedPolicy(flaky), tasks, tmp_path, settings(num_repeats=2))
    assert report.failures == {"policy_unavailable": 2} and report.unscored == 2
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    failed = df.filter(pl.col("reward").is_null())
    assert set(failed["task_id"]) == {tasks[2].task_id}
    assert df.filter(pl.col("reward").is_not_null())["reward"].to_list() == [1.0] * 10


def test_a_bug_stops_the_collection_and_a_rerun_resumes(tmp_path):
    """Any other exception stops it; finished rows are on disk; the re-run adds the rest."""
    env = LatencyEnv()
    tasks = [t for t in env.make_tasks() if not t.ground_truth["slow"]]
    bad = tasks[7].prompt[0]["content"]

    def buggy(prompt, turn, observations):
        if prompt == bad:
            raise ZeroDivisionError("a bug")
        return worker(prompt, turn, observations)

    with pytest.raises(ZeroDivisionError):
        collect(env, ScriptedPolicy(buggy), tasks, tmp_path, settings(concurrency=2))
    before = read_parts(tmp_path / ROLLOUTS_DIR)
    assert 0 < before.height < len(tasks) and tasks[7].task_id not in before["task_id"]
    report = collect(env, ScriptedPolicy(worker), tasks, tmp_path, settings(concurrency=2))
    assert report.collected == len(tasks) - before.height
    after = read_parts(tmp_path / ROLLOUTS_DIR)
    expected = {p.rollout_id for p in plan_collection(tasks, settings())}
    assert after.height == len(tasks) and set(after["rollout_id"]) == expected


def test_an_exception_a_signal_raises_mid_generate_ends_the_collection(tmp_path):
    """pytest-timeout's exception (or Ctrl-C's) is a ``BaseException`` raised inside generate;
    asyncio keeps it in the batching task, so the batch's episodes got no turn and waited
    forever (a learning test that ran past its timeout hung instead of failing). They get it
    too, and the collection stops with it."""

    class Interrupted(BaseException):
        pass

    def interrupted(prompt, turn, observations):
        raise Interrupted("a signal arrived mid-generate")

    env = LatencyEnv()
    tasks = [t for t in env.make_tasks() if not t.ground_truth["slow"]][:4]
    raised: list[BaseException] = []

    def run() -> None:
        try:
            collect(env, ScriptedPolicy(interrupted), tasks, tmp_path, settings())
        except BaseException as exc:
            raised.append(exc)

    collector = threading.Thread(target=run, daemon=True)
    collector.start()
    collector.join(60)
    assert not collector.is_alive(), "the collection waited forever for its model turns"
    assert len(raised) == 1 and isinstance(raised[0], Interrupted), raised
