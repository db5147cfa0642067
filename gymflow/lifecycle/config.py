"""One typed config for a lifecycle run; every field documented once, here."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gymflow.data.settings import TaskDataSettings
from gymflow.eval.gate import GateSettings
from gymflow.policy.tiny_model import TinyModelConfig
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.rollout.task_variants import VariantSettings
from gymflow.train.grpo import GRPOSettings
from gymflow.train.sft import SFTSettings


class LifecycleConfig(BaseModel):
    """Unknown keys and out-of-range values are refused before any work (one line per field)."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field("tool_call", description="Environment name (a folder under environments/).")
    model_path: str | None = Field(
        None,
        description="A local from_pretrained checkpoint to start from; None = embedded tiny model.",
    )
    tiny_model: TinyModelConfig = Field(default_factory=TinyModelConfig)
    n_tasks: int = Field(6000, ge=10, description="Task drafts generated before dedup.")
    task_seed: int = Field(1, description="Generator seed.")
    heldout_frac: float = Field(
        0.1, gt=0, lt=1, description="Share of tasks held out (by content hash)."
    )
    val_frac: float = Field(
        0.05, gt=0, lt=1, description="Share of tasks for validation (by content hash)."
    )
    task_data: TaskDataSettings = Field(
        default_factory=TaskDataSettings,
        description="Near-duplicate detection, leakage checks and task files added to splits.",
    )
    variants: VariantSettings | None = Field(
        None, description="LLM-written variants of train tasks from a teacher (None = none)."
    )
    demos: int = Field(
        300, ge=1, description="Size of the SFT demonstration set (the rest is GRPO's pool)."
    )
    profile_samples: int = Field(
        80, ge=1, le=10_000, description="Outputs scored twice by profile_verifier (50-100)."
    )
    format_threshold: float = Field(
        0.8, ge=0, le=1, description="Run SFT when the baseline valid-JSON rate is below."
    )
    val_eval_n: int = Field(
        64, ge=1, description="Validation tasks for SFT checkpoint picking and baseline."
    )
    heldout_n: int | None = Field(
        None, ge=1, description="Cap on held-out tasks evaluated (None = all)."
    )
    max_new_tokens: int = Field(
        DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn in evaluation."
    )
    sft: SFTSettings = Field(default_factory=SFTSettings)
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    sft_control: bool = Field(
        True, description="Also spend GRPO's wall time on more SFT and report it."
    )
    control_beside_grpo: bool = Field(
        True,
        description="Run the SFT control at the same time as GRPO (a spawned process; each "
        "gets half the CPU threads) instead of after it: the pair costs one GRPO wall time.",
    )
    gate: GateSettings = Field(default_factory=GateSettings)
    seed: int = Field(
        0, description="Seed for demo selection, SFT order and GRPO sampling (it sets their seeds)."
    )

    @model_validator(mode="after")
    def _splits_leave_training_data(self) -> LifecycleConfig:
        if self.heldout_frac + self.val_frac >= 0.9:
            raise ValueError(
                f"heldout_frac + val_frac = {self.heldout_frac + self.val_frac:g} leaves under "
                "10 % of the tasks for training; keep their sum below 0.9"
            )
        return self

    def overridden(self, changes: dict) -> LifecycleConfig:
        """This config with ``changes`` applied field by field, nested settings included
        (``{"grpo": {"learning_rate": 2e-4}}`` keeps every other GRPO setting)."""

        def merge(base: dict, new: dict) -> dict:
            out = dict(base)
            for key, value in new.items():
                nested = isinstance(value, dict) and isinstance(base.get(key), dict)
                out[key] = merge(base[key], value) if nested else value
            return out

        return self.model_validate(merge(self.model_dump(), changes))

    def digest(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def smoke(cls) -> LifecycleConfig:
        """A reduced budget that still runs every stage (tests, CI)."""
        return cls(
            tiny_model=TinyModelConfig(
                hidden_size=64, num_layers=2, intermediate_size=192, corpus_size=1500
            ),
            n_tasks=800,
            demos=64,
            profile_samples=50,
            val_eval_n=16,
            heldout_n=48,
            sft=SFTSettings(max_steps=30, batch_size=16, eval_every=15, warmup_steps=5),
            grpo=GRPOSettings(
                max_steps=3,
                prompts_per_step=2,
                num_generations=4,
                save_every=2,
                max_resample_rounds=1,
            ),
            gate=GateSettings(general_envs=["games"], general_n=8),
        )
