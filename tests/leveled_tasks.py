"""Minimal train tasks with an optional difficulty ``level`` in their ground truth, for the
curriculum and readiness tests."""

from __future__ import annotations

from gymflow.core.task_record import Task


def leveled_task(i: int, level: int | None) -> Task:
    """Task ``t{i}`` (ground truth ``{"x": i}``, plus ``"level"`` unless ``level`` is None)."""
    truth = {"x": i} if level is None else {"x": i, "level": level}
    return Task(
        task_id=f"t{i}", env="e", split="train", prompt=[{"role": "user", "content": str(i)}],
        tools=[], ground_truth=truth, generator="g", seed=0, content_hash=str(i),
    )  # fmt: skip
