"""GRPO on TRL's ``GRPOTrainer`` with our rollout engine plugged in through ``rollout_func``.

TRL owns the loss, the optimizer and the checkpoints; we own generation, the environment
episodes and the rollout store. The dataset's ``prompt`` column holds task ids; TRL hands each
generation batch (already repeated ``num_generations`` times) to
:class:`~gymflow.train.rollout_source.RolloutSource`, which runs the episodes against the
environment server (on the back end the settings name, :mod:`gymflow.train.rollout_backends`),
refills zero-variance groups (:mod:`gymflow.train.dynamic_sampling`: TRL 1.16 lacks it), writes
every rollout to Parquet, and returns tokens, sampling logprobs, ``env_mask`` and the verifier's
reward as an extra column. The settings are :mod:`gymflow.train.grpo_settings`'. A LoRA run
saves the merged model, so the final policy loads with ``from_pretrained`` like a full
fine-tune.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.device import trains_on_cpu
from gymflow.train.checkpoint_choice import load_chosen
from gymflow.train.demo_loss import DemoLoss, with_demo_loss
from gymflow.train.distributed import agreed, is_main
from gymflow.train.grpo_settings import GRPOSettings, LoraSettings, LossType
from gymflow.train.lr_schedule import with_progress_schedule
from gymflow.train.resume import KEEP_CHECKPOINTS, Progress
from gymflow.train.rollout_backends import rollout_policy
from gymflow.train.rollout_source import RolloutSource
from gymflow.train.shared_prompt import with_shared_prompts

__all__ = [
    "GRPOSettings", "LoraSettings", "LossType", "RolloutSource", "completions_trained",
    "env_reward", "rollout_policy", "run_grpo", "stopped_by", "trainer_config",
]  # fmt: skip


def env_reward(completions, env_reward, **kwargs) -> list[float]:
    """The reward TRL optimizes: the verifier's, computed in the rollout (an extra column)."""
    return list(env_reward)


def run_grpo(
    model_path: Path,
    out_dir: Path,
    source: RolloutSource,
    settings: GRPOSettings,
    log_to_mlflow: bool = True,
    resume: bool = True,
    callbacks: list | None = None,
    demos: list[dict] | None = None,
) -> dict:
    """Train from ``model_path``; resumes from the newest checkpoint in ``out_dir`` if any
    (:mod:`gymflow.train.resume`: the wall time of earlier attempts counts against the budget).

    ``callbacks`` are extra ``TrainerCallback``s, called after the checkpoint's progress is
    recorded (the step benchmark times steps with one; the lifecycle injects failures and
    scores validation with :func:`gymflow.train.checkpoint_choice.validation_callback`: the
    saved policy is then its best step, ``validation`` in the result says which). ``demos``
    (``{"prompt", "completion"}`` pairs, as SFT takes) feed ``settings.demo_loss``.
    """
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    progress = Progress.find(out_dir / "trainer", resume)

    class TimeBudget(TrainerCallback):
        """Stops at the time budget, earlier attempts' training time included."""

        def on_step_end(self, args, state, control, **kw):
            # the step's rollouts are on disk before its checkpoint (saved after this) can be
            source.wait_stored()
            budget = settings.time_budget_s
            if budget is not None and agreed(lambda: progress.trained_s() > budget):
                control.should_training_stop = True
            return control

    from datasets import Dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_path)
    peft_config = settings.lora.peft_config() if settings.lora is not None else None
    batch = settings.prompts_per_step * settings.num_generations
    config = trainer_config(settings, out_dir / "trainer", log_to_mlflow)
    n_rows = max(len(source.pool_ids), batch)
    dataset = Dataset.from_list(
        [{"prompt": source.pool_ids[i % len(source.pool_ids)]} for i in range(n_rows)]
    )
    trainer_cls = GRPOTrainer
    if settings.demo_loss is not None:
        if not demos:
            raise GymflowError(
                FailureKind.BAD_CONFIG, "grpo.demo_loss needs demonstrations; the run has none"
            )
        demo_loss = DemoLoss(
            demos, tokenizer, settings.demo_loss, settings.seed, source.replay,
            share_prefix=settings.share_prompts,
        )  # fmt: skip
        trainer_cls = with_demo_loss(GRPOTrainer, demo_loss)
    if settings.share_prompts:
        trainer_cls = with_shared_prompts(trainer_cls)
    if settings.lr_schedule != "constant" or settings.warmup_steps:
        trainer_cls = with_progress_schedule(
            trainer_cls, settings.lr_schedule, settings.max_steps, settings.time_budget_s,
            progress.trained_s, settings.warmup_steps,
        )  # fmt: skip
    trainer = trainer_cls(
        model=model,
        reward_funcs=[env_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=source,
        callbacks=[TimeBudget(), progress.recorder(), *(callbacks or [])],
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)  # metrics go to MLflow; keep the console readable
    checkpoint, done_steps = progress.checkpoint, progress.steps
    source.resume_at(done_steps)
    progress.start_clock()
    try:
        if done_steps >= settings.max_steps:
            # Killed after its last step: the checkpoint is the result. Resuming from it would
            # train one step past max_steps (transformers 5.23), so load it instead (Trainer's
            # own loader: full weights or a LoRA adapter alike).
            trainer._load_from_checkpoint(str(checkpoint))
            trainer.state.global_step = done_steps
        else:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except BaseException:
        with contextlib.suppress(Exception):  # keep what can be stored; report training's error
            source.wait_stored()
        raise
    finally:
        source.close()
    source.wait_stored()
    wall = progress.trained_s()
    validation = load_chosen(trainer, out_dir, model_path)  # the best validated step, if any
    final = out_dir / "final"
    if peft_config is not None:  # the adapter folded in: the policy loads as a plain model
        merged = trainer.model.merge_and_unload()
        if is_main():
            merged.save_pretrained(final)
    else:
        trainer.save_model(str(final))
    if is_main():
        tokenizer.save_pretrained(final)
    return {
        "path": str(final),
        "steps": trainer.state.global_step,
        "wall_s": round(wall, 2),
        "resumed_from": progress.resumed_from,
        "dynamic_sampling": dict(source.stats),
        "log_history": trainer.state.log_history,
        "validation": validation,
        "stopped_by": stopped_by(trainer.state.global_step, settings),
    }


def stopped_by(steps: int, settings: GRPOSettings) -> str:
    """Which limit ended a finished GRPO run: ``"max_steps"``, else the only other stop a run
    that returns can have met, ``"time_budget"`` (a failure raises instead).

    >>> stopped_by(250, GRPOSettings(max_steps=250, time_budget_s=340))
    'max_steps'
    >>> stopped_by(132, GRPOSettings(max_steps=250, time_budget_s=340))
    'time_budget'
    """
    return "max_steps" if steps >= settings.max_steps else "time_budget"


def completions_trained(steps: int, settings: GRPOSettings) -> int:
    """Completions ``steps`` updates trained on: a batch of prompts per step × generations is
    sampled at every ``num_iterations``-th step and trained on at that step and the next ones.

    >>> completions_trained(151, GRPOSettings(prompts_per_step=4, num_generations=8))
    4832
    >>> completions_trained(5, GRPOSettings(prompts_per_step=4, num_generations=8, num_iterations=2))
    96
    """
    batches = -(-steps // settings.num_iterations)
    return batches * settings.prompts_per_step * settings.num_generations


def trainer_config(settings: GRPOSettings, output_dir: Path, log_to_mlflow: bool = True):
    """TRL's ``GRPOConfig`` for ``settings``: CPU, fp32, ``num_iterations`` optimizer steps on each
    generation batch (one by default)."""
    from trl import GRPOConfig

    batch = settings.prompts_per_step * settings.num_generations
    vllm, engine = {}, settings.rollout
    if engine.engine == "trl_vllm":  # TRL's own engine ("vllm" is gymflow's)
        vllm = {
            "use_vllm": True,
            "vllm_mode": engine.mode,
            "vllm_gpu_memory_utilization": engine.gpu_memory_utilization,
        }
        if engine.server_url:
            vllm["vllm_server_base_url"] = engine.server_url
    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=not vllm and trains_on_cpu(settings.device),
        **vllm,
        bf16=False,
        fp16=False,
        max_steps=settings.max_steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=settings.num_generations,
        num_iterations=settings.num_iterations,
        max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",  # lr_schedule: gymflow.train.lr_schedule installs its own
        warmup_steps=0,
        weight_decay=0.0,
        beta=settings.loss.beta,
        loss_type=settings.loss.type,
        importance_sampling_level=settings.loss.importance_sampling_level,
        scale_rewards=settings.loss.scale_rewards,
        epsilon_high=settings.loss.epsilon_high,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_every,
        save_total_limit=KEEP_CHECKPOINTS,
        report_to="mlflow" if log_to_mlflow else "none",
        gradient_checkpointing=settings.gradient_checkpointing,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=settings.seed,
    )
