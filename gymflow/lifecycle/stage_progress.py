"""The lifecycle's stages as progress lines: started, done (or cached, or failed) and how long.

Prefect state hooks (``on_running``, ``on_completion``, ``on_failure``; the stage tasks take
them from ``tasks/options.py``) call these in the thread that runs the stage, so the stage's
tracker is the outer one of the trainer's or the evaluation's trackers opened inside it
(:mod:`gymflow.core.progress`). While a stage has nothing finer to say, its tracker keeps the
log alive with its running time; the evaluation stages count their episodes. Without a command
line asking for progress (a Prefect worker, a test) the hooks do nothing.
"""

from __future__ import annotations

import time

from gymflow.core import progress

RUN_TRACKER = "run"
"""The whole run's tracker (``gymflow run`` opens it): stages done, and the one running now."""
EPISODE_STAGES = frozenset({"profile_verifier", "baseline_eval", "heldout_gate"})
"""Stages whose tracker counts the episodes the episode driver runs inside them."""


def stage_running(task, task_run, state) -> None:
    if progress.mode() not in ("bar", "lines"):
        return
    counts = task.name in EPISODE_STAGES
    progress.note(f"{task.name}: started")
    if (run := progress.find_open(RUN_TRACKER)) is not None:
        run.update(now=task.name)
    progress.open_tracker(task.name, None, "episode", counts_episodes=counts)


def stage_completed(task, task_run, state) -> None:
    if state.name == "Cached":
        _end(task.name, lambda wall: "cached: done by an earlier attempt")
    else:
        _end(task.name, lambda wall: f"done in {wall}")


def stage_failed(task, task_run, state) -> None:
    why = (state.message or state.name)[:300]
    _end(task.name, lambda wall: f"failed after {wall}: {why}")


def _end(name: str, outcome) -> None:
    """Close the stage's tracker with ``outcome(wall time)`` (just a line if it had none)."""
    if progress.mode() not in ("bar", "lines"):
        return
    if (run := progress.find_open(RUN_TRACKER)) is not None:
        run.update(advance=1, now=f"after {name}")
    tracker = progress.find(name)
    if tracker is None:
        progress.note(f"{name}: {outcome('0 s')}")
    else:
        tracker.close(outcome(f"{time.monotonic() - tracker.opened:.1f} s"))
