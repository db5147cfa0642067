"""A planted heavy verifier for the Ray verification tests: ``math`` that says which process
scored it, and hangs on an answer that asks it to.

Ray actors build it from its class (``ray_verify_envs.PidMath``), so the test puts this folder
on the ``PYTHONPATH`` of the Ray cluster it starts.
"""

from __future__ import annotations

import os
import time

from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text
from gymflow.environments.math.environment import MathEnvironment

HANG = "please hang"
"""An answer holding this makes the verifier sleep for a minute (a stuck verifier)."""


class PidMath(MathEnvironment):
    """``math`` (same name, so its tasks) with the verifying process's id in the components."""

    def verify(self, task, items) -> Score:
        if HANG in final_assistant_text(items):
            time.sleep(60)
        score = super().verify(task, items)
        return Score(
            score.reward, score.success, score.failure_kind, {"pid": os.getpid()}, score.detail
        )
