"""Score the same trajectories in two separate processes, timing each verification.

A verifier that is deterministic within one process can still differ across processes: it
may read module-level state, a per-process random draw, set or hash order (``PYTHONHASHSEED``
differs per process), the clock or the working folder. Scoring each trajectory twice in one
process would not see that; :func:`score_in_two_processes` scores every trajectory once in each
of two freshly *spawned* processes (the parent may hold torch threads; forking those can
deadlock), both at once. Each process builds the environment from its class (module +
qualified name), as the resources server's verify pool does.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.env.verify_pool import _verify_in_worker


@dataclass(frozen=True)
class Scoring:
    """One verification in one process: the score (``Score.to_dict``) or the error it raised."""

    score: dict | None
    error: str | None
    latency_s: float
    pid: int

    def verdict(self) -> tuple:
        """What must be equal across processes: reward, success, kind and components."""
        if self.score is None:
            return ("error", self.error)
        s = self.score
        return (s["reward"], s["success"], s["failure_kind"], sorted(s["components"].items()))


def _score_all(env_class: tuple[str, str], jobs: list[tuple[dict, list[dict]]]) -> list[Scoring]:
    import os

    out = []
    for task, items in jobs:
        started = time.perf_counter()
        try:
            score, error = _verify_in_worker(env_class, task, items), None
        except Exception as exc:  # a verifier bug: reported per sample, never a silent 0
            score, error = None, f"{type(exc).__name__}: {exc}"
        out.append(Scoring(score, error, time.perf_counter() - started, os.getpid()))
    return out


def score_in_two_processes(
    env: Environment, samples: list[tuple[Task, list[dict]]], timeout_s: float | None = None
) -> tuple[list[Scoring], list[Scoring]]:
    """Every ``(task, items)`` scored in process A and in process B (run side by side).

    Raises ``verify_timeout`` if a process has not finished within ``timeout_s`` (default:
    60 s + 5 s per sample); its process is killed.
    """
    env_class = (type(env).__module__, type(env).__qualname__)
    jobs = [(task.model_dump(), items) for task, items in samples]
    limit = timeout_s if timeout_s is not None else 60.0 + 5.0 * len(jobs)
    context = multiprocessing.get_context("spawn")
    pools = [ProcessPoolExecutor(1, mp_context=context) for _ in range(2)]
    try:
        futures = [pool.submit(_score_all, env_class, jobs) for pool in pools]
        deadline = time.monotonic() + limit
        first, second = (
            future.result(timeout=max(0.0, deadline - time.monotonic())) for future in futures
        )
    except FutureTimeout:
        _kill(pools)
        raise GymflowError(
            FailureKind.VERIFY_TIMEOUT,
            f"scoring {len(jobs)} samples with the {env.name} verifier took over {limit:g} s "
            "in one process: the verifier hangs on some trajectory",
        ) from None
    except BrokenProcessPool:
        _kill(pools)
        raise GymflowError(
            FailureKind.VERIFIER_ERROR,
            f"a process scoring with the {env.name} verifier died (killed, out of memory, or "
            "the environment class cannot be built there: it must import and build with no "
            "arguments)",
        ) from None
    except BaseException:
        _kill(pools)
        raise
    finally:
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
    return first, second


def _kill(pools: list[ProcessPoolExecutor]) -> None:
    for pool in pools:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.kill()
