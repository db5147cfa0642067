"""Pick the GRPO checkpoint the gate gets by its validation score, as SFT does.

Every ``every`` steps, and at the step training stops on, :class:`ValidationChoice` scores the
policy with ``evaluate(model, tokenizer)`` (the lifecycle: greedy success on the validation
split, batched through the one episode driver; the held-out split is left to the gate). A
score above every earlier one becomes the Trainer's own best (``state.best_metric``,
``state.best_global_step``) and that step is saved: the Trainer then records it as
``best_model_checkpoint`` and keeps that folder when it rotates old checkpoints, and all of it
travels in ``trainer_state.json``, so a resumed run knows the best of the steps before its
checkpoint. Scores go into ``state.log_history`` as :data:`VALIDATION_METRIC` (and MLflow).

After training, :func:`load_chosen` puts the best step's weights into the trainer's model
(the Trainer's loader: full weights or a LoRA adapter), so what the caller saves is the chosen
policy, and writes ``validation.json`` (every score, the chosen step) beside the checkpoints.
Ties go to the later step (as SFT's choice does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

VALIDATION_METRIC = "grpo/val_greedy_success"
"""The MLflow metric (and ``log_history`` key) of each validation score; step = GRPO step."""
VALIDATION_FILE = "validation.json"


def validation_callback(
    evaluate: Callable[[object, object], float], every: int, log_to_mlflow: bool = True
):
    """A ``TrainerCallback`` scoring the policy every ``every`` steps and at the last one."""
    from transformers import TrainerCallback

    class ValidationChoice(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
            step = state.global_step
            if step % every and not control.should_training_stop:
                return control
            score = float(evaluate(model, processing_class))
            state.log_history.append({"step": step, VALIDATION_METRIC: score})
            if log_to_mlflow:
                import mlflow

                mlflow.log_metric(VALIDATION_METRIC, score, step=step)
            if state.best_metric is None or score >= state.best_metric:  # ties: the later
                state.best_metric, state.best_global_step = score, step
                control.should_save = True  # the Trainer then keeps it as best_model_checkpoint
            return control

    return ValidationChoice()


def history(log_history: list[dict]) -> list[dict]:
    """``[{"step", "success"}]``: the validation scores in a Trainer's log history."""
    return [
        {"step": row["step"], "success": row[VALIDATION_METRIC]}
        for row in log_history
        if VALIDATION_METRIC in row
    ]


def load_chosen(trainer, out_dir: Path) -> dict | None:
    """Load the best validated step into ``trainer.model``; ``None`` when nothing was validated.

    Returns ``{"history", "chosen_step", "chosen_success", "last_step"}`` (also written to
    ``out_dir/validation.json``). A run resumed after its last step has a bare state: its
    last checkpoint's ``trainer_state.json`` holds the scores then.
    """
    from transformers import TrainerState

    state = trainer.state
    if state.best_global_step is None:
        saved = Path(trainer.args.output_dir) / f"checkpoint-{state.global_step}"
        if (saved / "trainer_state.json").is_file():
            state = TrainerState.load_from_json(str(saved / "trainer_state.json"))
    if state.best_global_step is None:
        return None
    chosen, last = state.best_global_step, trainer.state.global_step
    record = {
        "history": history(state.log_history),
        "chosen_step": chosen,
        "chosen_success": state.best_metric,
        "last_step": last,
    }
    folder = Path(trainer.args.output_dir) / f"checkpoint-{chosen}"
    if chosen != last and not folder.is_dir():
        # only a process killed while the Trainer rotated checkpoints leaves this: say so
        record.update(chosen_step=last, chosen_success=None, best_step_lost=chosen)
    elif chosen != last:
        trainer._load_from_checkpoint(str(folder))
    (out_dir / VALIDATION_FILE).write_text(json.dumps(record, indent=1))
    return record
