"""Supervised fine-tuning on demonstrations with TRL's SFTTrainer.

Demonstrations are (rendered prompt, gold completion) pairs; the loss is on the completion only.
Training stops at ``max_steps`` or when ``time_budget_s`` runs out (the lifecycle uses the
latter for its "same wall time on more SFT" control). Every ``eval_every`` steps a callback
scores *sampled* success on a small validation set and keeps the best checkpoint: GRPO needs a
start that already succeeds on sampled rollouts some of the time, and greedy success overstates
that for an under-trained model (an under-trained model's greedy answer can be right while
most of its samples are not).

The trainer also saves a checkpoint at every evaluation and when it stops (the newest two kept,
with the best score and history so far, :mod:`gymflow.train.resume`); a re-run on the same
folder resumes from the last one, its earlier training time counting against a time budget.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.device import Device, trains_on_cpu
from gymflow.train.checkpoint_choice import load_chosen
from gymflow.train.resume import KEEP_CHECKPOINTS, Progress
from gymflow.train.sft_decision import SFTRun

SAMPLED_SUCCESS_METRIC = "sft/val_sampled_success"
"""The MLflow metric of every checkpoint-picking evaluation (step = the SFT step)."""


class SFTSettings(BaseModel):
    model_config = {"extra": "forbid"}

    run: SFTRun = Field(
        "auto",
        description='Whether SFT runs before GRPO: "auto" when the baseline\'s rate of '
        "well-formed answers (the environment's format check, Environment.well_formed) is "
        'under format_threshold on any environment; "always"; "never". The run says which '
        "and why (summary.json's sft_decision, report.md, the terminal).",
    )
    max_steps: int = Field(400, ge=1, description="Optimizer steps at most.")
    batch_size: int = Field(32, ge=1, description="Demonstrations per step.")
    learning_rate: float = Field(
        1e-3, gt=0.0, le=1.0, description="Peak learning rate (constant after warm-up)."
    )
    warmup_steps: int = Field(20, ge=0, description="Linear warm-up steps.")
    eval_every: int = Field(
        25, ge=1, description="Steps between sampled-success evaluations (and checkpoints)."
    )
    target_sampled_success: float = Field(
        0.3,
        ge=0.0,
        description="Stop once validation success sampled at sample_temperature reaches this "
        "(>1 = never): GRPO needs a start that succeeds on sampled rollouts some of the time, "
        "and gains most from one that succeeds only some of the time (docs/tuning.md).",
    )
    sample_temperature: float = Field(
        1.0,
        gt=0.0,
        le=5.0,
        description="Temperature of the sampled validation that stops SFT (and picks the SFT "
        "control's checkpoint). Its own setting, not GRPO's: a hotter check hands GRPO a start "
        "trained much longer, one GRPO gains far less on (docs/tuning.md).",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass: activation memory falls by "
        "more than half for a second forward pass; for a real model's long prompts on a CPU "
        "(docs/how-to/your-checkpoint.md).",
    )
    share_prefix: bool = Field(
        True,
        description="Run each batch's common prefix (the system turn and tool schemas every "
        "request starts with) once in the loss forward (gymflow.train.shared_prefix: TRL's "
        "loss and gradients, less compute).",
    )
    device: Device = Field(
        "auto", description="Where SFT trains: auto = CUDA when torch sees a GPU, else the CPU."
    )
    time_budget_s: float | None = Field(
        240.0,
        gt=0.0,
        description="Stop after this much training wall time, earlier attempts' included "
        "(None: no limit). A cap for a slow CPU, above what the embedded default needs to "
        "reach target_sampled_success on a 2-core CPU: a start cut short of the target hands "
        "GRPO a policy that barely formats (docs/tuning.md).",
    )
    seed: int = Field(0, description="Shuffling and init seed.")


def demonstrations(env, tokenizer, tasks) -> list[dict]:
    """``{"prompt", "completion"}`` pairs: the rendered prompt and the gold answer plus EOS.

    A task whose gold episode takes several turns (``env.gold_turns``: a multi-step
    environment's calls, then its answer) gives one pair per assistant turn: the gold episode
    is played through the in-process resources server, so each later turn's prompt holds the
    real tool outputs the model will see, and the loss stays on the model's own turns.
    """
    from gymflow.core.conversation import messages_from_items, split_rendered
    from gymflow.rollout.examples import play

    pairs, multi = [], []
    for t in tasks:
        turns = env.gold_turns(t)
        if len(turns) > 1:
            multi.append((t, turns))
            continue
        prompt = tokenizer.apply_chat_template(
            t.prompt, tools=t.tools, add_generation_prompt=True, tokenize=False
        )
        pairs.append({"prompt": prompt, "completion": turns[0] + tokenizer.eos_token})
    for episode in play(env, multi) if multi else []:
        task = episode.task
        messages = messages_from_items(episode.items[len(task.prompt) :])
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                history = [*task.prompt, *messages[:i]]
                prompt, completion = split_rendered(tokenizer, history, task.tools, [message])
                pairs.append({"prompt": prompt, "completion": completion})
    return pairs


def run_sft(
    model_path: Path,
    out_dir: Path,
    demos: list[dict],
    settings: SFTSettings,
    evaluate: Callable[[object, object], float] | None = None,
    time_budget_s: float | None = None,
    log_to_mlflow: bool = True,
    should_stop: Callable[[float], bool] | None = None,
    resume: bool = True,
    callbacks: list | None = None,
) -> dict:
    """Train on ``demos`` (``{"prompt": str, "completion": str}``); returns the best checkpoint.

    ``evaluate(model, tokenizer) -> sampled success`` picks the checkpoint; without it the last
    step is kept. ``should_stop(elapsed_s)`` is asked after every step (the control's
    :class:`~gymflow.train.twin_clock.TwinClock`); it may raise to abandon the run.
    ``elapsed_s`` and ``time_budget_s`` (default: ``settings.time_budget_s``) count training
    time, earlier attempts' included; the step a time limit stops at is evaluated too. With
    ``resume``, training goes on from the last checkpoint in ``out_dir`` (a finished one is
    the result as is). ``callbacks``: extra ``TrainerCallback``s, called after a checkpoint's
    progress is recorded; with :func:`gymflow.train.checkpoint_choice.validation_callback`
    among them the saved policy is its chosen step (``validation`` says which). Returns
    ``{"path", "steps", "wall_s", "resumed_from", "history": [{"step", "sampled_success"}],
    "validation", "stopped_by"}``; ``stopped_by`` names the limit that ended training:
    ``"target_sampled_success"``, ``"time_budget"``, ``"should_stop"`` or ``"max_steps"``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTTrainer

    from datasets import Dataset
    from gymflow.train.shared_prefix import with_shared_prefix

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    best_dir = out_dir / "best"
    progress = Progress.find(out_dir / "trainer", resume)
    history: list[dict] = list(progress.state.get("history", []))

    same_settings = progress.state.get("settings") == settings.model_dump_json()
    if time_budget_s is None:
        time_budget_s = settings.time_budget_s

    class Watch(TrainerCallback):
        best = float(progress.state.get("best", -1.0))
        # finished under other settings (a re-run with a fix): train on from its checkpoint
        stopped = bool(progress.state.get("finished")) and same_settings
        stopped_by: str | None = progress.state.get("stopped_by") if stopped else None

        def carry(self) -> dict:
            return {
                "best": self.best,
                "history": history,
                "finished": self.stopped,
                "stopped_by": self.stopped_by,
                "settings": settings.model_dump_json(),
            }

        def on_step_end(self, args, state, control, **kw):
            step = state.global_step
            elapsed = progress.trained_s()
            why = None
            if time_budget_s is not None and elapsed > time_budget_s:
                why = "time_budget"
            elif should_stop is not None and should_stop(elapsed):
                why = "should_stop"
            elif step >= settings.max_steps:
                why = "max_steps"
            if evaluate is not None and (step % settings.eval_every == 0 or why is not None):
                score = evaluate(model, tokenizer)
                history.append({"step": step, "sampled_success": score})
                if log_to_mlflow:
                    import mlflow

                    mlflow.log_metric(SAMPLED_SUCCESS_METRIC, score, step=step)
                if score >= self.best:
                    self.best = score
                    _save(model, tokenizer, best_dir)
                if score >= settings.target_sampled_success:
                    why = "target_sampled_success"
            if why is not None:
                control.should_training_stop = True
                self.stopped_by = why
            self.stopped = control.should_training_stop  # max_steps included (set before us)
            control.should_save = control.should_save or self.stopped
            return control

    config = sft_config(
        out_dir, max_steps=settings.max_steps, batch_size=settings.batch_size,
        learning_rate=settings.learning_rate, warmup_steps=settings.warmup_steps,
        save_every=settings.eval_every, log_to_mlflow=log_to_mlflow, device=settings.device,
        seed=settings.seed, max_length=model.config.max_position_embeddings,  # the whole context
        gradient_checkpointing=settings.gradient_checkpointing,
    )  # fmt: skip
    watch = Watch()
    trainer_cls = with_shared_prefix(SFTTrainer) if settings.share_prefix else SFTTrainer
    trainer = trainer_cls(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(demos),
        processing_class=tokenizer,
        callbacks=[watch, progress.recorder(watch.carry), *(callbacks or [])],
    )
    trainer.remove_callback(PrinterCallback)  # metrics go to MLflow; keep the console readable
    if len(trainer.train_dataset) == 0:  # TRL drops pairs with nothing left to learn
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"none of the {len(demos)} demonstrations fits the model's "
            f"{model.config.max_position_embeddings}-token context with its completion",
        )
    progress.start_clock()
    if watch.stopped:  # the last attempt finished training: its last checkpoint is the result
        trainer._load_from_checkpoint(str(progress.checkpoint))
        trainer.state.global_step = progress.steps
    else:
        trainer.train(resume_from_checkpoint=progress.resumed_from)
    # a checkpoint_choice callback among ``callbacks`` (the SFT control): its chosen step
    validation = load_chosen(trainer, out_dir, model_path)
    if validation is not None or evaluate is None or not best_dir.exists():
        _save(model, tokenizer, best_dir)
    return {
        "path": str(best_dir),
        "steps": trainer.state.global_step,
        "wall_s": round(progress.trained_s(), 2),
        "resumed_from": progress.resumed_from,
        "history": history,
        "validation": validation,
        "stopped_by": watch.stopped_by,
    }


def _save(model, tokenizer, path: Path) -> None:
    from gymflow.train.distributed import is_main

    if not is_main():  # several processes train one model: rank 0 writes it
        return
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def sft_config(
    out_dir: Path, *, max_steps: int, batch_size: int, learning_rate: float, warmup_steps: int,
    save_every: int, log_to_mlflow: bool, device: Device, seed: int, **more,
):  # fmt: skip
    """TRL's ``SFTConfig`` as every supervised update here runs it (SFT, the SFT control, online
    RFT): a constant learning rate after warm-up, no weight decay, checkpoints every
    ``save_every`` steps (the last few kept, for resume), fp32, no data-loader workers, MLflow
    reporting only when asked. ``more`` adds the caller's own fields."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(out_dir / "trainer"),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=warmup_steps,
        weight_decay=0.0,
        logging_steps=10,
        save_strategy="steps",
        save_steps=save_every,
        save_total_limit=KEEP_CHECKPOINTS,
        report_to="mlflow" if log_to_mlflow else "none",
        use_cpu=trains_on_cpu(device),
        bf16=False,
        fp16=False,
        dataloader_num_workers=0,
        seed=seed,
        disable_tqdm=True,
        **more,
    )
