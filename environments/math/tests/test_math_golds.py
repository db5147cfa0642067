"""math: every gold answer scores 1.0 — all of GSM8K test, all of MATH-500, generated tasks.

The 2,319 checks (most gold answers are parsed for the first time) run in a pool of two
spawned workers, as the resources server runs this verifier: ~17 s here.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.environments.math import MathEnvironment
from gymflow.environments.math.loaders import source_tasks

GENERATED = 500


def _golds_that_fail(source: str, part: int, parts: int) -> tuple[int, list[str], float]:
    """(tasks checked, failures, slowest check in CPU seconds) for every parts-th task."""
    env = MathEnvironment()
    if source == "generated":
        tasks = build_tasks(env, GENERATED, seed=11, heldout_frac=0.0, val_frac=0.0)
    else:
        tasks = list(source_tasks(source))
    failures, slowest = [], 0.0
    for task in tasks[part::parts]:
        items = prompt_items(task.prompt) + assistant_items(env.gold_text(task), 0)
        start = time.thread_time()
        s = env.verify(task, items)
        slowest = max(slowest, time.thread_time() - start)
        if not (s.reward == 1.0 and s.success):
            failures.append(f"{task.task_id}: {s.failure_kind} {s.detail}")
    return len(tasks[part::parts]), failures, slowest


def test_every_gold_answer_scores_one():
    jobs = [("math500", 0, 2), ("math500", 1, 2), ("gsm8k", 0, 1), ("generated", 0, 1)]
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        results = list(pool.map(_golds_that_fail, *zip(*jobs, strict=True)))
    counts = {}
    for (source, _, _), (n, failures, slowest) in zip(jobs, results, strict=True):
        assert failures == [], failures[:10]
        assert slowest < 1.0, f"{source}: a gold check took {slowest:.2f} s of CPU"
        counts[source] = counts.get(source, 0) + n
    assert counts["gsm8k"] == 1319 and counts["math500"] == 500
    assert counts["generated"] > 0.8 * GENERATED  # duplicates of the easy levels dropped
