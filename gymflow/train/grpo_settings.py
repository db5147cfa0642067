"""GRPO's settings: every field of ``grpo.*`` in a run's config, each documented once.

The loss variants, KL, reward scaling and LoRA are TRL's and PEFT's own; the settings only name
them and refuse unknown values up front (TRL itself would fail only at the first loss). Settings
of one concern are one section: ``loss`` (:class:`LossSettings`), ``rollout`` (the engine,
:mod:`gymflow.train.rollout_engine`), ``lora``, ``task_pool``, ``preflight``, ``demo_loss``.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from gymflow.policy.device import Device
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.train.demo_loss import DemoLossSettings
from gymflow.train.lr_schedule import Schedule
from gymflow.train.readiness import PreflightSettings
from gymflow.train.rollout_engine import (
    LocalEngine,
    RolloutEngine,
    flat_to_nested,
    moved_keys_error,
)
from gymflow.train.task_pool import TaskPoolSettings

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""The ``loss_type`` values TRL 1.16 implements (``GRPOTrainer._compute_loss``)."""


class LoraSettings(BaseModel):
    """A PEFT LoRA adapter on the policy; merged into the weights when training ends."""

    model_config = {"extra": "forbid"}

    r: int = Field(16, gt=0, description="Adapter rank.")
    alpha: int = Field(32, gt=0, description="Scaling numerator (``lora_alpha``).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the adapter input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Modules to adapt; ``all-linear`` = every linear but the head."
    )

    def peft_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self.target_modules,
            task_type="CAUSAL_LM",
        )


class LossSettings(BaseModel):
    """GRPO's objective, as TRL computes it: the loss variant, the KL term, the advantages'
    scaling and the clip. GSPO is ``importance_sampling_level="sequence"`` with ``type="grpo"``."""

    model_config = {"extra": "forbid"}

    type: LossType = Field("dapo", description="TRL loss variant (its `loss_type`).")
    beta: float = Field(0.0, ge=0.0, description="KL coefficient; 0 loads no reference model.")
    importance_sampling_level: Literal["token", "sequence"] = Field(
        "token", description='"sequence" with type "grpo" is GSPO.'
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description='Advantage scaling; Dr. GRPO uses "none".'
    )
    epsilon_high: float = Field(0.28, gt=0.0, description="Upper clip (DAPO clip-higher).")


MOVED_TO_LOSS = {
    "loss_type": "type", "beta": "beta", "importance_sampling_level": "importance_sampling_level",
    "scale_rewards": "scale_rewards", "epsilon_high": "epsilon_high",
}  # fmt: skip
"""The flat ``grpo.*`` keys that ``grpo.loss`` holds now: old key -> its name there."""


def _flat_loss(grpo: dict) -> dict:
    """The flat loss keys ``grpo`` holds, under their names in ``grpo.loss``."""
    return {new: grpo[old] for old, new in MOVED_TO_LOSS.items() if old in grpo}


def nested_grpo(grpo: dict) -> dict:
    """``grpo`` settings written with the flat keys of earlier versions (the rollout engine's,
    the loss's), in today's nested ones with the same meaning (a saved run resumes)."""
    loss = _flat_loss(grpo)
    out = {key: value for key, value in grpo.items() if key not in MOVED_TO_LOSS}
    if loss:
        out["loss"] = {**out.get("loss", {}), **loss}
    return flat_to_nested(out)


def _moved_keys(grpo: dict) -> str | None:
    """What to write instead of flat keys that moved (None when there are none)."""
    problems = [moved] if (moved := moved_keys_error(grpo)) else []
    if loss := _flat_loss(grpo):
        old = ", ".join(key for key in MOVED_TO_LOSS if key in grpo)
        problems.append(f'{old}: moved into grpo.loss; write "loss": {json.dumps(loss)}')
    return "; ".join(problems) or None


class GRPOSettings(BaseModel):
    model_config = {"extra": "forbid"}

    max_steps: int = Field(
        250, ge=1, description="Optimizer steps (the time budget may stop it first)."
    )
    prompts_per_step: int = Field(4, ge=1, description="Distinct tasks per step (B).")
    num_generations: int = Field(
        8, ge=2, description="Completions per task (G, the group size; 2 or more to compare)."
    )
    num_iterations: int = Field(
        1,
        ge=1,
        description="Updates on each batch of rollouts (TRL's num_iterations, GRPO's mu): the "
        "batch sampled at one step is trained on again at the next mu - 1 steps, through the "
        "clipped ratio to the policy that sampled it; 1: every step samples its own.",
    )
    learning_rate: float = Field(5e-4, gt=0.0, le=1.0, description="Peak learning rate.")
    lr_schedule: Schedule = Field(
        "cosine",
        description="How the learning rate falls from its peak to about 0 when the run ends, "
        "at max_steps or at time_budget_s, whichever is further along (gymflow.train.lr_schedule).",
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        description="Steps over which the learning rate ramps up linearly to the schedule's "
        "(gymflow.train.lr_schedule.warmup); 0: the first step trains at the peak.",
    )
    loss: LossSettings = Field(
        default_factory=LossSettings, description="The objective TRL computes (its GRPO loss)."
    )
    lora: LoraSettings | None = Field(None, description="Train a LoRA adapter (PEFT) instead.")
    temperature: float = Field(
        1.1,
        gt=0.0,
        le=5.0,
        description="Rollout sampling temperature (TRL scales the loss's logits to match).",
    )
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn.")
    dynamic_sampling: bool = Field(
        True, description="Replace zero-variance groups with fresh ones."
    )
    max_resample_rounds: int = Field(2, ge=0, description="Replacement rounds per batch at most.")
    task_sampling: Literal["uniform", "difficulty"] = Field(
        "difficulty",
        description='Which tasks a step draws: "uniform" (TRL\'s shuffled dataset) or '
        '"difficulty" (a pool that tracks pass rates, gymflow.train.task_pool; a run on '
        'several environments, which the pool does not weigh, falls back to "uniform").',
    )
    task_pool: TaskPoolSettings = Field(
        default_factory=TaskPoolSettings, description='The "difficulty" pool\'s weights.'
    )
    preflight: PreflightSettings | None = Field(
        default_factory=PreflightSettings,
        description="Before the first step: pass@1, pass@G and the expected zero-variance "
        "share of the start on a sample of the pool, a verdict against the learnable band, "
        "and the curriculum's levels (gymflow.train.readiness); null: no preflight.",
    )
    demo_loss: DemoLossSettings | None = Field(
        default_factory=DemoLossSettings,
        description="Add an SFT loss on the run's demonstrations to every step "
        "(gymflow.train.demo_loss); null: the verifier's reward only.",
    )
    share_prompts: bool = Field(
        True,
        description="Run each group's shared prompt once in the loss forward "
        "(gymflow.train.shared_prompt), and the demo loss's common prefix once "
        "(gymflow.train.shared_prefix): TRL's log-probs and gradients, less compute.",
    )
    validate_every: int | None = Field(
        25,
        ge=1,
        description="Score greedy validation success every N steps and at the last; the best "
        "step is the policy GRPO hands on (None: the last step, nothing scored).",
    )
    validate_tasks: int | None = Field(
        None,
        ge=1,
        description="Validation tasks the checkpoint rule scores, for GRPO and its control "
        "alike: the first N of the val split, each environment its share; more than the "
        "split holds: all of it (None: val_eval_n, the tasks SFT's sampled check scores).",
    )
    save_every: int = Field(20, ge=1, description="Checkpoint every N steps (resume point).")
    time_budget_s: float | None = Field(
        300.0,
        gt=0.0,
        description="Stop after this much training wall time, earlier attempts' included (None: "
        "no limit). It ends the embedded default on a 2-core CPU, its SFT control training "
        "beside it; how it was chosen: the Results log (docs/results/default.md).",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass: activation memory falls by "
        "more than half for a second forward pass; for a real model's long prompts on a CPU "
        "(docs/how-to/your-checkpoint.md).",
    )
    device: Device = Field(
        "auto",
        description="Where GRPO trains (and, on the local engine, rolls out): auto = CUDA when "
        'torch sees a GPU, else the CPU. Not "cpu" with rollout engine "trl_vllm".',
    )
    seed: int = Field(0, description="Trainer and sampling seed.")
    rollout: RolloutEngine = Field(
        default_factory=LocalEngine,
        description='Where rollouts run, by its "engine": "local" (the trainer\'s model, in its '
        'process), "ray" (Ray rollout workers), "vllm" (a `vllm serve` process gymflow starts and '
        'syncs; CPU or GPU), "trl_vllm" (TRL\'s vLLM engine, GPU) or "agents" (external agent '
        "programs through the capturing proxy); each engine's own settings beside it "
        "(gymflow.train.rollout_engine).",
    )

    @model_validator(mode="before")
    @classmethod
    def _engine_keys_moved(cls, data):
        if isinstance(data, dict) and (moved := _moved_keys(data)):
            raise ValueError(moved)
        return data

    @model_validator(mode="after")
    def _engine_can_train(self) -> GRPOSettings:
        engine = self.rollout.engine
        if engine == "ray" and self.lora is not None:
            raise ValueError('rollout engine "ray" rolls out full weights: no lora')
        if engine == "trl_vllm" and self.device == "cpu":
            raise ValueError(
                'rollout engine "trl_vllm" needs the GPU: set device "auto" or "cuda", or '
                'engine "vllm"'
            )
        return self
