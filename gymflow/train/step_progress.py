"""A trainer's steps as progress (:mod:`gymflow.core.progress`): step, figures, ETA.

:func:`step_progress` returns a ``transformers.TrainerCallback`` for ``run_sft`` and
``run_grpo``'s ``callbacks``. It opens a tracker when training begins (at the step a resumed
run starts from), moves it at every optimizer step, shows figures the trainer logs (SFT's
loss), and closes it when training ends with one line saying where it stopped. With a time budget the time left of it
counts the earlier attempts' training time too (read from the checkpoint resumed from, as
:mod:`gymflow.train.resume` keeps it), like the budget itself does.
"""

from __future__ import annotations

import time
from pathlib import Path

from gymflow.core import progress
from gymflow.train.resume import Progress


def step_progress(
    label: str, max_steps: int, budget_s: float | None = None, logged: tuple[str, ...] = ()
):
    """The callback; a no-op unless a command line asked for progress. ``logged``: keys of the
    trainer's logs shown as they come (SFT's ``loss``; GRPO's reward and zero-variance share
    come from its rollout batches instead, through :func:`gymflow.core.progress.show`)."""
    from transformers import TrainerCallback

    class StepProgress(TrainerCallback):
        tracker: progress.Tracker | None = None

        def on_train_begin(self, args, state, control, **kw):
            if progress.mode() in ("bar", "lines"):
                before = Progress.find(Path(args.output_dir)).wall_before_s
                began = time.monotonic()
                self.tracker = progress.open_tracker(
                    label, max_steps, "step", budget_s=budget_s,
                    used_s=lambda: before + time.monotonic() - began,
                )  # fmt: skip
                self.tracker.update(state.global_step)
            return control

        def on_log(self, args, state, control, logs=None, **kw):
            if self.tracker is not None and logs:
                shown = {key: float(logs[key]) for key in logged if key in logs}
                if shown:
                    self.tracker.update(**shown)
            return control

        def on_step_end(self, args, state, control, **kw):
            if self.tracker is not None:
                self.tracker.update(state.global_step)
            return control

        def on_train_end(self, args, state, control, **kw):
            if self.tracker is not None:  # one last line: the step it stopped at, its figures
                t = self.tracker
                took = progress.clock(time.monotonic() - t.opened)
                said = [f"trained to step {state.global_step}/{max_steps} in {took}", *t.figures()]
                t.close(" · ".join(said))
                self.tracker = None
            return control

    return StepProgress()
