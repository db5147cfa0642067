"""A GRPO run in its own process, for tests/test_grpo_kill_resume.py to kill and resume.

``python tests/grpo_kill_child.py BASE OUT SLOW_S``: trains from the model at ``BASE`` into
``OUT`` (6 steps, a checkpoint every 2) with the counter environment's rollouts stored under
``OUT/rollouts``; ``SLOW_S`` seconds of sleep after each step give the test time to kill it
mid-run. Prints the result as one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from graded_counter import GradedCounter  # tests/ is the script's folder
from transformers import TrainerCallback

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.rollout.store import Lineage
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo


class Slow(TrainerCallback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kw):
        time.sleep(self.seconds)


def main(base: Path, out: Path, slow_s: float) -> None:
    import torch

    torch.set_num_threads(1)
    env = GradedCounter()
    pool = build_tasks(env, 64, seed=3, heldout_frac=0.0, val_frac=0.0)
    settings = GRPOSettings(
        max_steps=6, prompts_per_step=2, num_generations=4, max_new_tokens=12,
        learning_rate=1e-2, temperature=1.0, save_every=2, time_budget_s=None,
        dynamic_sampling=False, demo_loss=None, task_sampling="uniform",
    )  # fmt: skip
    lineage = Lineage("kill-resume", 0, 0, "grpo", env.name, env.version, "test")
    source = RolloutSource(env, build_app(env), pool, settings, out, lineage)
    result = run_grpo(base, out, source, settings, log_to_mlflow=False, callbacks=[Slow(slow_s)])
    print(json.dumps({k: result[k] for k in ("steps", "resumed_from", "wall_s")}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
