"""Verifier profiling: score policy samples, gold answers and adversarial probes twice each.

Before any training the verifier must be deterministic (the same trajectory gets the same
verdict, in another process too), must give every gold answer its top score, and must not
reward a probe above the ceiling the probe declares. :func:`profile_verifier`

1. gathers ``n`` samples through the environment's real (in-process) resources server: most
   from the policy, sampled at a temperature above 0, when it produces any
   (``POLICY_SHARE``), a tenth gold episodes and the rest the environment's probes, every
   kind of probe at least once;
2. scores every sample's trajectory once in each of two spawned processes
   (:func:`~gymflow.eval.rescoring.score_in_two_processes`), timing each verification;
3. returns the report (:class:`ProfileReport`): the problems found, the reward distribution,
   the probe table, determinism, verify latency and every sample with its full trajectory.

The caller logs the report, then calls :meth:`ProfileReport.raise_for_problems`, so a person
can read what failed in MLflow and Prefect while the run stops.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, Probe
from gymflow.env.resources_server import build_app
from gymflow.eval.rescoring import Scoring, score_in_two_processes
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling

GOLD_SHARE = 0.1
POLICY_SHARE = 0.7
"""Of the samples, when the policy produces episodes; probes take the rest (at least one each)."""
PROBLEM_ORDER = (
    FailureKind.VERIFIER_NONDETERMINISTIC,
    FailureKind.VERIFIER_ERROR,
    FailureKind.PROBE_REWARDED,
    FailureKind.GOLD_REJECTED,
)
"""The kind the stop is raised with is the first found in this order (a non-deterministic
verifier makes every other finding unreliable)."""


@dataclass
class Sample:
    """One trajectory to score: where it comes from, its task and items, and its ceiling."""

    source: str
    """``policy``, ``gold`` or ``probe:<name>``."""
    task: Task
    items: list[dict]
    ceiling: float | None = None
    """A probe's highest allowed reward."""


@dataclass
class ProfileReport:
    samples: list[Sample]
    first: list[Scoring]
    second: list[Scoring]
    policy_requested: int
    timings: dict[str, float] = field(default_factory=dict)
    """``gather_s`` (episodes through the server) and ``score_s`` (both processes)."""
    problems: list[tuple[FailureKind, str]] = field(default_factory=list)

    def raise_for_problems(self) -> None:
        """Stop with one line: the most serious kind, how many problems, the first of it."""
        if not self.problems:
            return
        kinds = [k for k in PROBLEM_ORDER if any(p[0] == k for p in self.problems)]
        first = next(message for kind, message in self.problems if kind == kinds[0])
        counts = ", ".join(f"{sum(p[0] == k for p in self.problems)} {k}" for k in kinds)
        raise GymflowError(
            kinds[0],
            f"verifier profiling stopped the run before training ({counts}); first: {first}. "
            "See reports/verifier_samples.md for every sample; fix the verifier and run again.",
        )


def profile_verifier(
    env: Environment,
    tasks: Sequence[Task],
    n: int,
    seed: int,
    policy: object | None,
    sampling: Sampling,
) -> ProfileReport:
    """Gather ``n`` samples (``policy`` may be ``None``), score each in two processes, check."""
    if sampling.greedy or sampling.temperature <= 0:
        raise GymflowError(
            FailureKind.BAD_CONFIG, "profile the policy's sampled outputs: temperature > 0"
        )
    started = time.perf_counter()
    samples, requested = asyncio.run(_gather(env, list(tasks), n, seed, policy, sampling))
    gathered = time.perf_counter()
    first, second = score_in_two_processes(env, [(s.task, s.items) for s in samples])
    timings = {"gather_s": gathered - started, "score_s": time.perf_counter() - gathered}
    report = ProfileReport(samples, first, second, requested, timings)
    report.problems = find_problems(samples, first, second)
    return report


def find_problems(
    samples: Sequence[Sample], first: Sequence[Scoring], second: Sequence[Scoring]
) -> list[tuple[FailureKind, str]]:
    """Every red flag, one ``(kind, message)`` per sample and flag."""
    problems = []
    for sample, a, b in zip(samples, first, second, strict=True):
        where = f"{sample.source} on {sample.task.task_id}"
        if a.verdict() != b.verdict():
            problems.append(
                (
                    FailureKind.VERIFIER_NONDETERMINISTIC,
                    f"{where} scored {_short(a)} in process {a.pid} and {_short(b)} in "
                    f"process {b.pid}",
                )
            )
        if a.score is None:
            problems.append((FailureKind.VERIFIER_ERROR, f"{where} raised {a.error}"))
            continue
        reward, success = a.score["reward"], a.score["success"]
        if sample.ceiling is not None and (reward > sample.ceiling or success):
            problems.append(
                (
                    FailureKind.PROBE_REWARDED,
                    f"{where} got {reward:g} (ceiling {sample.ceiling:g}"
                    f"{', and success' if success else ''})",
                )
            )
        if sample.source == "gold" and not success:
            problems.append(
                (
                    FailureKind.GOLD_REJECTED,
                    f"{where} got {reward:g} ({a.score['failure_kind']}: {a.score['detail']})",
                )
            )
    return problems


def _short(scoring: Scoring) -> str:
    if scoring.score is None:
        return f"an error ({scoring.error})"
    s = scoring.score
    return f"{s['reward']:g} ({'success' if s['success'] else s['failure_kind']})"


async def _gather(
    env: Environment,
    tasks: list[Task],
    n: int,
    seed: int,
    policy: object | None,
    sampling: Sampling,
) -> tuple[list[Sample], int]:
    """Samples in the shares above; gold and probes fill the policy's share if it has none."""
    if not tasks:
        raise GymflowError(FailureKind.BAD_REQUEST, "no tasks to profile the verifier on")
    rng = random.Random(seed)
    order = rng.sample(tasks, len(tasks))
    n_gold = max(1, round(n * GOLD_SHARE))
    n_policy = round(n * POLICY_SHARE) if policy is not None else 0
    kinds = len(env.probes(order[0]))
    n_policy = max(0, min(n_policy, n - n_gold - kinds))  # room for one probe of each kind
    app = build_app(env)
    async with EnvClient(app=app) as client:
        samples = await _policy_samples(client, env, policy, order, n_policy, seed, sampling)
        n_gold += (n_policy - len(samples)) // 4  # a policy without episodes: more gold
        for i in range(n_gold):
            samples.append(await _gold(client, env, order[i % len(order)]))
        for task, probe in _probe_plan(env, order, n - len(samples)):
            items = await _replay(client, env, task, [probe.text])
            samples.append(Sample(f"probe:{probe.name}", task, items, probe.max_reward))
        missing = n - len(samples)  # few tasks: fewer distinct probes than the budget
        if missing > 0 and any(s.source == "policy" for s in samples):
            more_seed = seed + n_policy
            samples += await _policy_samples(
                client, env, policy, order, missing, more_seed, sampling
            )
        else:
            samples += [
                await _gold(client, env, order[(n_gold + i) % len(order)]) for i in range(missing)
            ]
    while len(samples) > n and samples[0].source == "policy":  # probe kinds found late
        samples.pop(0)
    return samples, n_policy


async def _policy_samples(
    client: EnvClient,
    env: Environment,
    policy: object | None,
    tasks: list[Task],
    count: int,
    first_seed: int,
    sampling: Sampling,
) -> list[Sample]:
    """``count`` sampled episodes of the policy over ``tasks`` in turn (a seed each)."""
    if policy is None or count <= 0:
        return []
    picked = [tasks[i % len(tasks)] for i in range(count)]
    seeds = [first_seed + i for i in range(count)]
    episodes = await run_episodes(client, env, policy, picked, sampling, seeds)
    return [Sample("policy", ep.task, ep.items) for ep in episodes if not ep.policy_failed]


async def _gold(client: EnvClient, env: Environment, task: Task) -> Sample:
    return Sample("gold", task, await _replay(client, env, task, env.gold_turns(task)))


def _probe_plan(env: Environment, tasks: list[Task], budget: int) -> list[tuple[Task, Probe]]:
    """``budget`` probes over the tasks in turn, every kind the first task has at least once:
    task ``i`` gets probe ``i`` (shifted by one each time round the tasks)."""
    plan: list[tuple[Task, Probe]] = []
    kinds = {probe.name for probe in env.probes(tasks[0])}
    chosen: set[tuple[str, str]] = set()
    for i in range(len(tasks) * max(1, len(kinds))):
        if len(plan) >= budget and not kinds:
            break
        task = tasks[i % len(tasks)]
        probes = env.probes(task)
        if not probes:
            continue
        probe = probes[(i + i // len(tasks)) % len(probes)]
        if len(plan) >= budget and probe.name not in kinds:
            continue  # the budget is spent: only kinds not yet tried
        if (task.task_id, probe.name) not in chosen:
            chosen.add((task.task_id, probe.name))
            kinds.discard(probe.name)
            plan.append((task, probe))
    return plan


async def _replay(client: EnvClient, env: Environment, task: Task, turns: list[str]) -> list[dict]:
    """A scripted episode through the server: its trajectory items."""
    sampling = Sampling(max_completion_tokens=1 << 20)
    (episode,) = await run_episodes(
        client, env, ScriptedPolicy.replay(turns), [task], sampling, [0]
    )
    return episode.items
