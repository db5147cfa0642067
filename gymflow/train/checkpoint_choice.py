"""The one checkpoint rule for both candidates of the gate: GRPO and its SFT control.

Both hand the gate the step with the best **greedy** validation success on the same validation
tasks (the lifecycle: the first ``val_eval_n`` of the val split, batched through the one
episode driver; the held-out split is left to the gate), scored every ``every`` steps, at the
step training stops on, and at **step 0** — the start itself, before the first update — so a
candidate that only got worse hands the start back. Ties go to the later step. The gate scores
greedy too, so the rule picks what the gate will see, for either trainer: the same
``TrainerCallback`` (:func:`validation_callback`) runs in TRL's ``GRPOTrainer`` and in its
``SFTTrainer`` (:func:`gymflow.train.sft.run_sft` with ``callbacks``). :class:`CheckpointRule`
says it in words for the gate's reason.

A score above every earlier one becomes the Trainer's own best (``state.best_metric``,
``state.best_global_step``) and that step is saved: the Trainer then records it as
``best_model_checkpoint`` and keeps that folder when it rotates old checkpoints, and all of it
travels in ``trainer_state.json``, so a resumed run knows the best of the steps before its
checkpoint. Scores go into ``state.log_history`` under the callback's metric (and MLflow).

After training, :func:`load_chosen` puts the best step's weights into the trainer's model
(the Trainer's loader: full weights or a LoRA adapter; step 0: the start's weights, or a LoRA
adapter zeroed back to its start), so what the caller saves is the chosen policy, and writes
``validation.json`` (every score, the chosen step) beside the checkpoints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

VALIDATION_METRIC = "grpo/val_greedy_success"
"""GRPO's MLflow metric (and ``log_history`` key) of each validation score; step = its step."""
CONTROL_VALIDATION_METRIC = "sft_control/val_greedy_success"
"""The SFT control's, scored by the same rule."""
RULE_KEY = "checkpoint_rule/score"
"""The ``log_history`` key every score also goes under, whatever its metric's name."""
VALIDATION_FILE = "validation.json"


@dataclass(frozen=True)
class CheckpointRule:
    """The rule in words: ``every`` steps (None: no choice, the last step) on ``tasks`` tasks."""

    every: int | None
    tasks: int

    def text(self) -> str:
        if self.every is None:
            return "the last step of each (validation off)"
        return (
            f"greedy success on the same {self.tasks} val tasks every {self.every} steps, "
            "step 0 (the start) and the last step included, the best, ties to the later step"
        )


class ChosenCheckpoint(BaseModel):
    """What the rule chose for one candidate (``validation.json``'s content)."""

    chosen_step: int
    last_step: int
    chosen_success: float | None = None
    history: list[dict] = []
    """``[{"step", "success"}]``: every score, step 0 first."""
    best_step_lost: int | None = None
    """A best step whose folder a killed rotation removed (the last step is used then)."""

    def text(self) -> str:
        """``step 225 of 250 (val 0.781)``; step 0 says it is the start."""
        score = f"val {self.chosen_success:.3f}" if self.chosen_success is not None else "val ?"
        start = "the start, " if self.chosen_step == 0 else ""
        return f"step {self.chosen_step} of {self.last_step} ({start}{score})"


def validation_callback(
    evaluate: Callable[[object, object], float],
    every: int,
    log_to_mlflow: bool = True,
    metric: str = VALIDATION_METRIC,
):
    """A ``TrainerCallback`` scoring the policy at step 0, every ``every`` steps and at the
    last one, keeping the best (ties: the later step)."""
    from transformers import TrainerCallback

    def record(state, step: int, score: float) -> None:
        state.log_history.append({"step": step, metric: score, RULE_KEY: score})
        if log_to_mlflow:
            import mlflow

            mlflow.log_metric(metric, score, step=step)

    class ValidationChoice(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, processing_class=None, **kw):
            if state.global_step == 0 and not history(state.log_history):
                score = float(evaluate(model, processing_class))  # the start, untouched
                record(state, 0, score)
                state.best_metric, state.best_global_step = score, 0
            return control

        def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
            step = state.global_step
            if step % every and not control.should_training_stop:
                return control
            score = float(evaluate(model, processing_class))
            record(state, step, score)
            if state.best_metric is None or score >= state.best_metric:  # ties: the later
                state.best_metric, state.best_global_step = score, step
                control.should_save = True  # the Trainer then keeps it as best_model_checkpoint
            return control

    return ValidationChoice()


def history(log_history: list[dict]) -> list[dict]:
    """``[{"step", "success"}]``: the validation scores in a Trainer's log history (GRPO's
    metric alone in states saved before the rule had its own key)."""
    return [
        {"step": row["step"], "success": row.get(RULE_KEY, row.get(VALIDATION_METRIC))}
        for row in log_history
        if RULE_KEY in row or VALIDATION_METRIC in row
    ]


def load_chosen(trainer, out_dir: Path, start: Path | None = None) -> dict | None:
    """Load the best validated step into ``trainer.model``; ``None`` when nothing was validated.

    Step 0 is the start (``start``: its ``from_pretrained`` folder). Returns
    :class:`ChosenCheckpoint`'s fields (also written to ``out_dir/validation.json``). A run
    resumed after its last step has a bare state: its last checkpoint's
    ``trainer_state.json`` holds the scores then.
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
    record = ChosenCheckpoint(
        chosen_step=chosen,
        last_step=last,
        chosen_success=state.best_metric,
        history=history(state.log_history),
    )
    folder = Path(trainer.args.output_dir) / f"checkpoint-{chosen}"
    if chosen == 0 and last > 0:
        if start is None:
            raise ValueError("the start won the validation, but its folder was not given")
        _restore_start(trainer.model, start)
    elif chosen != last and not folder.is_dir():
        # only a process killed while the Trainer rotated checkpoints leaves this: say so
        record = record.model_copy(
            update={"chosen_step": last, "chosen_success": None, "best_step_lost": chosen}
        )
    elif chosen != last:
        trainer._load_from_checkpoint(str(folder))
    (out_dir / VALIDATION_FILE).write_text(json.dumps(record.model_dump(), indent=1))
    return record.model_dump()


def _restore_start(model, start: Path) -> None:
    """Put the start's weights back: a LoRA model's adapters to zero (``B = 0``: the adapter
    adds nothing, the base weights never changed), a full model's from ``start``."""
    import torch

    lora = [p for name, p in model.named_parameters() if "lora_B" in name]
    if lora:
        with torch.no_grad():
            for p in lora:
                p.zero_()
        return
    from transformers import AutoModelForCausalLM

    weights = AutoModelForCausalLM.from_pretrained(start).state_dict()
    model.load_state_dict(weights)
