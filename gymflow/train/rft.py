"""Online rejection-sampling fine-tuning (RFT): a control for GRPO that uses the same verifier.

RFT — RAFT++, ReST-EM, expert iteration — is the cheap alternative RLVR is measured against in
the literature (DeepSeekMath, arXiv 2402.03300: RFT < online RFT < GRPO at 1.3B; Xiong et al.
2025, arXiv 2504.11343: RAFT++ close to GRPO at 3-7B). Each step samples ``k`` episodes of
``prompts_per_step`` tasks from the *current* policy, keeps the ones the verifier calls
successes, drops prompts whose samples all failed, and takes one SFT step on the successes
(the loss on the model's own completion tokens only, as SFT trains on demonstrations), each
distinct successful completion of a prompt once. The
sampling side is :mod:`gymflow.train.rft_sampling`: the task pool GRPO draws from, the one
episode driver, the environments' in-process resources servers.

TRL's ``SFTTrainer`` does the update: its loss, optimizer, scheduler and checkpoints, with each
batch's common prefix run once (:mod:`gymflow.train.shared_prefix`). What TRL lacks, and this
adds: SFTTrainer trains on a fixed dataset and has no online rejection-sampling trainer (its
``GRPOTrainer`` samples from the live policy but takes a policy-gradient step on every sample);
here the trainer's dataset holds task ids and :func:`with_online_successes` turns each batch of
them, at the step it is trained on, into the verified successes of that step's own samples — a
step without a success updates nothing —, and records what was spent
(:class:`~gymflow.eval.arms.ArmCompute`).

Two choices keep RFT from collapsing onto a few answers (the measurements behind them are in
the Results log, ``docs/results/arms.md``):

* tasks are drawn afresh each step by default (``task_sampling="uniform"``), not from GRPO's
  difficulty pool: that pool replays the tasks whose pass rate is in its learnable band, which
  for RFT are the ones it already solves, so its updates imitate the same few answers over and
  over (GRPO's zero-mean advantages do not reward a replayed answer so); identical successful
  completions of a prompt are trained once for the same reason (RFT as Yuan et al. 2023,
  arXiv 2308.01825, keeps distinct reasoning paths);
* its learning rate is below the SFT control's: the policy's own successes are already likely
  (near-zero loss), and Adam's normalised steps at SFT's rate move every weight as far as a
  demonstration the policy has not learned would, breaking it within a few updates.

Checkpoints follow the one rule of the gate's candidates: pass
:func:`gymflow.train.checkpoint_choice.validation_callback` in ``callbacks`` (the lifecycle's
``candidate_choice``) and the saved policy is the step with the best greedy validation success,
step 0 included (:func:`~gymflow.train.checkpoint_choice.load_chosen`), as for the SFT control.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.eval.arms import ArmCompute, CostPoint
from gymflow.policy.device import Device
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.train.checkpoint_choice import load_chosen
from gymflow.train.resume import Progress
from gymflow.train.rft_sampling import SamplingPlan, StepBatch, SuccessSampler
from gymflow.train.sft import sft_config
from gymflow.train.task_pool import TaskPoolSettings

RFT_POOL_FILE = "rft_task_pool.parquet"


class RFTSettings(BaseModel):
    """Online RFT: sample from the current policy, keep verified successes, imitate them."""

    model_config = {"extra": "forbid"}

    max_steps: int = Field(250, ge=1, description="Optimizer steps at most.")
    prompts_per_step: int = Field(4, ge=1, description="Tasks drawn per step.")
    samples_per_prompt: int = Field(
        8, ge=1, description="Episodes sampled per task from the current policy (k)."
    )
    temperature: float = Field(
        1.1, gt=0.0, le=5.0, description="Sampling temperature of the episodes."
    )
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn.")
    batch_size: int = Field(
        32,
        ge=1,
        description="Verified successes one update trains on at most (a seeded draw when a step "
        "found more); the loss is the mean over their completion tokens.",
    )
    learning_rate: float = Field(
        2e-4,
        gt=0.0,
        le=1.0,
        description="Peak learning rate (constant after warm-up), below the SFT control's: the "
        "policy's own successes are already likely, and at SFT's rate Adam's normalised steps "
        "break the policy within a few updates (gymflow.train.rft's docstring).",
    )
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    drop_all_failed: bool = Field(
        True,
        description="Replace prompts whose samples all failed with fresh ones from the pool "
        "(up to max_resample_rounds rounds), as GRPO's dynamic sampling replaces groups that "
        "teach nothing; false: they only leave the step with fewer successes.",
    )
    max_resample_rounds: int = Field(2, ge=0, description="Replacement rounds per step at most.")
    task_sampling: Literal["uniform", "difficulty"] = Field(
        "uniform",
        description='Which tasks a step draws: "uniform" (fresh tasks of the pool, as RFT reads '
        'a dataset) or "difficulty" (GRPO\'s pool, gymflow.train.task_pool, which replays tasks '
        "in its learnable band: RFT then imitates the same few answers again and again and can "
        "collapse onto them; see the module docstring). A mix of environments draws by its "
        "weights.",
    )
    task_pool: TaskPoolSettings = Field(
        default_factory=TaskPoolSettings, description='The "difficulty" pool\'s weights.'
    )
    save_every: int = Field(20, ge=1, description="Checkpoint every N steps (resume point).")
    time_budget_s: float | None = Field(
        300.0,
        gt=0.0,
        description="Stop after this much training wall time, earlier attempts' included "
        "(None: no limit).",
    )
    share_prefix: bool = Field(
        True,
        description="Run each batch's common prefix once in the loss forward "
        "(gymflow.train.shared_prefix: TRL's loss and gradients, less compute).",
    )
    device: Device = Field(
        "auto", description="Where RFT trains and samples: auto = CUDA when torch sees a GPU."
    )
    seed: int = Field(0, description="Sampling, drawing and trainer seed.")

    def sampling_plan(self) -> SamplingPlan:
        """The sampler's part of these settings (its fields share their names)."""
        return SamplingPlan(**{f.name: getattr(self, f.name) for f in fields(SamplingPlan)})


def tensor_batch(rows, pad_id: int) -> dict:
    """Right-padded ``input_ids``/``attention_mask``/``labels`` (labels on the targets only).

    >>> b = tensor_batch([([1, 2], [3, 4], [1, 0]), ([5], [6], [1])], pad_id=0)
    >>> b["input_ids"].tolist(), b["labels"].tolist()
    ([[1, 2, 3, 4], [5, 6, 0, 0]], [[-100, -100, 3, -100], [-100, 6, -100, -100]])
    """
    import torch

    width = max(len(p) + len(c) for p, c, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (p, c, m) in enumerate(rows):
        n = len(p) + len(c)
        ids[i, :n] = torch.tensor(p + c)
        labels[i, len(p) : n] = torch.tensor([t if k else -100 for t, k in zip(c, m, strict=True)])
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def with_online_successes(trainer_cls, sampler: SuccessSampler):
    """``trainer_cls`` (TRL's SFTTrainer or a subclass) whose every batch of task ids becomes
    the verified successes of samples drawn from the model being trained, at that step."""
    import torch

    from gymflow.policy.transformers_backend import TransformersPolicy

    class OnlineRFTTrainer(trainer_cls):
        last_batch: StepBatch | None = None

        def training_step(self, model, inputs, num_items_in_batch=None):
            policy = TransformersPolicy(self.model, self.processing_class)
            batch = sampler.step(policy, self.state.global_step, inputs["task_ids"])
            self.last_batch = batch
            if not batch.rows:  # no gradient at all: the optimizer leaves every weight as it is
                return torch.zeros((), device=self.args.device)
            pad = self.processing_class.pad_token_id
            tensors = tensor_batch(batch.rows, pad if pad is not None else 0)
            return super().training_step(model, tensors, None)

    return OnlineRFTTrainer


def run_rft(
    model_path: Path,
    out_dir: Path,
    env: Environment,
    app,
    pool: list[Task],
    settings: RFTSettings,
    log_to_mlflow: bool = True,
    resume: bool = True,
    callbacks: list | None = None,
    should_stop: Callable[[float], bool] | None = None,
    mix: dict[str, tuple[Environment, object]] | None = None,
    weights: dict[str, float] | None = None,
    arm: str = "rft",
) -> dict:
    """Online RFT from ``model_path`` on tasks drawn from ``pool`` (``env`` served by ``app``;
    ``mix``/``weights``: more environments, as GRPO's ``RolloutSource`` takes them).

    Stops at ``settings.max_steps``, at ``settings.time_budget_s`` of training wall time
    (earlier attempts' included, validation too) or when ``should_stop(elapsed_s)`` says so.
    ``callbacks``: extra ``TrainerCallback``s (the checkpoint rule's
    :func:`~gymflow.train.checkpoint_choice.validation_callback`: the saved policy is then its
    chosen step, ``validation`` says which). With ``resume`` training goes on from the last
    checkpoint in ``out_dir``. Returns ``{"path", "steps", "wall_s", "resumed_from",
    "validation", "stopped_by", "compute"}``; ``compute`` is
    :class:`~gymflow.eval.arms.ArmCompute`'s fields plus the sampler's ledger (``rft``:
    prompts drawn and dropped, successes found and trained).
    """
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTTrainer

    from datasets import Dataset
    from gymflow.train.shared_prefix import with_shared_prefix

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    progress = Progress.find(out_dir / "trainer", resume)
    envs = {env.name: (env, app)} | dict(mix or {})
    out_dir.mkdir(parents=True, exist_ok=True)
    sampler = SuccessSampler(envs, pool, settings.sampling_plan(), weights, out_dir / RFT_POOL_FILE)
    sampler.resume_at(progress.steps, progress.state.get("spent"))
    curve: list[dict] = [c for c in progress.state.get("curve", []) if c["step"] <= progress.steps]
    stopped: dict[str, str] = {}

    class Ledger(TrainerCallback):
        """The cost curve, and the limits GRPO's run also stops at."""

        def on_step_end(self, args, state, control, **kw):
            spent = sampler.spent
            elapsed = progress.trained_s()
            curve.append(
                CostPoint(
                    step=state.global_step, wall_s=round(elapsed, 3),
                    samples_generated=spent.samples_generated,
                    examples_trained=spent.successes_trained,
                ).model_dump()
            )  # fmt: skip
            if settings.time_budget_s is not None and elapsed > settings.time_budget_s:
                stopped["by"] = "time_budget"
            elif should_stop is not None and should_stop(elapsed):
                stopped["by"] = "should_stop"
            if stopped:
                control.should_training_stop = True
            if stopped or state.global_step >= settings.max_steps:
                control.should_save = True  # the step it stops on is a checkpoint, as in SFT
            return control

    def carry() -> dict:
        return {"spent": sampler.spent.as_dict(), "curve": curve}

    config = sft_config(
        out_dir, max_steps=settings.max_steps, batch_size=settings.prompts_per_step,
        learning_rate=settings.learning_rate, warmup_steps=settings.warmup_steps,
        save_every=settings.save_every, log_to_mlflow=log_to_mlflow, device=settings.device,
        seed=settings.seed, max_length=None, remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
    )  # fmt: skip
    n_rows = max(len(sampler.pool_ids), settings.prompts_per_step)
    dataset = Dataset.from_list(
        [{"task_id": sampler.pool_ids[i % len(sampler.pool_ids)]} for i in range(n_rows)]
    )
    base = with_shared_prefix(SFTTrainer) if settings.share_prefix else SFTTrainer
    trainer = with_online_successes(base, sampler)(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=lambda rows: {"task_ids": [r["task_id"] for r in rows]},
        callbacks=[Ledger(), progress.recorder(carry), *(callbacks or [])],
    )
    trainer.remove_callback(PrinterCallback)  # metrics go to MLflow; keep the console readable
    progress.start_clock()
    try:
        if progress.steps >= settings.max_steps:  # killed after its last step: that is the result
            trainer._load_from_checkpoint(str(progress.checkpoint))
            trainer.state.global_step = progress.steps
        else:
            trainer.train(resume_from_checkpoint=progress.resumed_from)
    finally:
        sampler.close()
    wall = progress.trained_s()
    validation = load_chosen(trainer, out_dir, model_path)
    final = out_dir / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    spent = sampler.spent
    steps = trainer.state.global_step
    compute = ArmCompute(
        arm=arm, steps=steps, updates=spent.updates, samples_generated=spent.samples_generated,
        examples_trained=spent.successes_trained, tokens_generated=spent.tokens_generated,
        tokens_trained=spent.tokens_trained, wall_s=round(wall, 2),
        curve=[CostPoint(**c) for c in curve],
    )  # fmt: skip
    return {
        "path": str(final),
        "steps": steps,
        "wall_s": round(wall, 2),
        "resumed_from": progress.resumed_from,
        "validation": validation,
        "stopped_by": stopped.get("by") or "max_steps",
        "compute": compute.model_dump() | {"rft": spent.as_dict()},
    }
