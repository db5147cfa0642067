"""Test helpers for GRPO runs on the counter environment: a verifier whose rewards and
success vary for a barely trained model, and a crash at a chosen step."""

from __future__ import annotations

from dataclasses import replace

from transformers import TrainerCallback

from gymflow.core.scoring import Score
from gymflow.environments.counter.environment import CounterEnvironment


class GradedCounter(CounterEnvironment):
    """counter scored by the share of digits in the answer: rewards vary for a random policy."""

    def verify(self, task, items) -> Score:
        answers = [it for it in items if it.get("type") == "message"]
        text = answers[-1]["content"] if answers else ""
        share = sum(c.isdigit() for c in text) / len(text) if text else 0.0
        return Score(share, False, None, {"digits": share}, "graded for tests")


class PassingCounter(GradedCounter):
    """``GradedCounter`` (reward = share of digits, in tenths) with success = over half."""

    def verify(self, task, items) -> Score:
        score = super().verify(task, items)
        return replace(score, reward=round(score.reward, 1), success=score.reward > 0.5)


class Crash(TrainerCallback):
    """Fails the run at the end of step ``step``, before that step's checkpoint is saved."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kw):
        if state.global_step == self.step:
            raise RuntimeError(f"crash at step {self.step}")
