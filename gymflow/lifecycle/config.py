"""One typed config for a lifecycle run; every field documented once, here."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gymflow.core.tracking_store import TrackingSettings
from gymflow.data.settings import TaskDataSettings
from gymflow.eval.gate import GateSettings
from gymflow.policy.tiny_model import TinyModelConfig
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.rollout.task_variants import VariantSettings
from gymflow.train.grpo import GRPOSettings
from gymflow.train.rft import RFTSettings
from gymflow.train.sft import SFTSettings


class LifecycleConfig(BaseModel):
    """Unknown keys and out-of-range values are refused before any work (one line per field)."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(
        "tool_call",
        description="Environment name (a folder under environments/). With envs: the mix's "
        "first environment (set from envs; naming another one is refused).",
    )
    envs: dict[str, float] | None = Field(
        None,
        description='A weighted mix of environments trained in one run, e.g. {"tool_call": '
        '0.5, "math": 0.3, "games": 0.2}: positive weights, normalized to sum 1. Every '
        "count (n_tasks, demos, val_eval_n, heldout_n) is shared by weight; profile_samples "
        "applies per environment; GRPO draws each batch by weight. None: the one env.",
    )
    registered_model: str | None = Field(
        None,
        description="Registered model name in MLflow (None: gymflow-<env>, or for a mix "
        "gymflow-mix-<its environments, sorted, joined by '-'>).",
    )
    model_path: str | None = Field(
        None,
        description="A local from_pretrained checkpoint to start from (a folder, a .gguf file, "
        "catalog:NAME), or a registered version, models:/NAME@ALIAS or models:/NAME/N, from "
        "wherever the registry is; None = the champion, else the embedded tiny model.",
    )
    tiny_model: TinyModelConfig = Field(default_factory=TinyModelConfig)
    tracking: TrackingSettings = Field(
        default_factory=TrackingSettings,
        description="The MLflow tracking server and registry of the run (default: "
        "MLFLOW_TRACKING_URI, else the home's store).",
    )
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
    controls: list[Literal["sft", "rft"]] = Field(
        default_factory=lambda: ["sft"],
        description="The cheaper alternatives GRPO is compared with, each trained from GRPO's "
        'start for GRPO\'s training wall time and a candidate of the gate: "sft" (more SFT on '
        'the demonstrations, beside GRPO when control_beside_grpo) and "rft" (online '
        "rejection-sampling fine-tuning: samples of the current policy, verified, the successes "
        "imitated; after GRPO, gymflow.train.rft). The run's verdict says whether RL pays: "
        "docs/concepts/gate.md. []: GRPO alone.",
    )
    rft: RFTSettings = Field(
        default_factory=RFTSettings,
        description='The "rft" control (controls): its sampling and update settings; its '
        "time budget is GRPO's training wall time.",
    )
    run_budget_s: float | None = Field(
        None,
        gt=0.0,
        description="Wall-time budget of the whole lifecycle, in seconds of its stages' own "
        "time: SFT and GRPO each get at most what is left of it when they start, less "
        "run_budget_reserve_s (SFT at most half of that), at least 30 s each, within their own "
        "time_budget_s; the SFT control follows GRPO. None: each stage's own limits only. "
        "gymflow.lifecycle.run_budget.",
    )
    run_budget_reserve_s: float = Field(
        45.0,
        ge=0.0,
        description="With run_budget_s: the seconds kept for the held-out gate, the registry "
        "and the report after GRPO (the default's take well under this on a 2-core CPU).",
    )
    control_beside_grpo: bool = Field(
        True,
        description="Run the SFT control at the same time as GRPO (a spawned process; each "
        "gets half the CPU threads) instead of after it: the pair costs one GRPO wall time.",
    )
    train_processes: int = Field(
        1,
        ge=1,
        description="Processes SFT, the SFT control and GRPO each train on (DDP through "
        "`accelerate launch`: gloo on CPUs, NCCL with one GPU per process; "
        "gymflow.lifecycle.launched). sft.batch_size and grpo.prompts_per_step are the global "
        "batch and must divide by it; with more than one, the control runs after GRPO for "
        "GRPO's training wall time, and a mix of environments and every rollout engine but "
        '"local" are refused.',
    )
    gate: GateSettings = Field(default_factory=GateSettings)
    agent_servers: list[str] | None = Field(
        None,
        description="Agent server URLs (gymflow agent serve) that run the baseline and "
        "held-out evaluations' episodes instead of this process, with the same rows. They load "
        "the run's checkpoints by path (the same machine, or a shared disk) and must hold the "
        "run's tasks or trust their clients' (--trust-client-tasks). None: in-process.",
    )
    eval_engine: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="The engine of the baseline evaluation's and the held-out gate's greedy "
        'episodes: "transformers" (each policy in this process) or "vllm" (one `vllm serve` '
        "process from the vLLM environment, make setup-vllm; CPU or GPU, whose weights are "
        "switched to each policy in turn: gymflow.eval.eval_engine). Episodes name it in their "
        "policy spec (vllm:PATH). The gate's gold-answer probabilities are forward passes in "
        "this process either way. Not with agent_servers.",
    )
    seed: int = Field(
        0, description="Seed for demo selection, SFT order and GRPO sampling (it sets their seeds)."
    )

    @field_validator("envs")
    @classmethod
    def _known_positive_normalized(cls, value: dict[str, float] | None) -> dict | None:
        if value is None:
            return None
        if not value:
            raise ValueError("empty: name one environment or more with their weights")
        from gymflow.env.registry import list_envs

        known = list_envs()
        unknown = [name for name in value if name not in known]
        if unknown:
            raise ValueError(f"no environment {unknown[0]!r} (known: {', '.join(known)})")
        bad = {k: w for k, w in value.items() if not (math.isfinite(w) and w > 0)}
        if bad:
            name, weight = next(iter(bad.items()))
            raise ValueError(f"weight of {name!r} is {weight}; weights must be positive numbers")
        total = sum(value.values())
        return {name: weight / total for name, weight in value.items()}

    @model_validator(mode="after")
    def _env_is_the_mix_first(self) -> LifecycleConfig:
        if self.envs is None:
            return self
        first = next(iter(self.envs))
        if "env" in self.model_fields_set and self.env != first:
            raise ValueError(
                f"env {self.env!r} and envs both given: a run on several environments names "
                f"them in envs only (env is then its first, {first!r}); drop env"
            )
        self.env = first
        if "task_sampling" not in self.grpo.model_fields_set:  # the pool weighs one env only
            self.grpo = self.grpo.model_copy(update={"task_sampling": "uniform"})
        unsupported = {
            "task_data.train_files": self.task_data.train_files,
            "task_data.heldout_files": self.task_data.heldout_files,
            "variants": self.variants,
            'grpo.task_sampling "difficulty"': self.grpo.task_sampling == "difficulty",
            'grpo.rollout engine "ray"': self.grpo.rollout.engine == "ray",
        }
        for name, value in unsupported.items():
            if value:
                raise ValueError(f"{name} is not supported with envs (one environment only)")
        return self

    @model_validator(mode="after")
    def _evaluations_on_one_engine(self) -> LifecycleConfig:
        if self.eval_engine == "vllm" and self.agent_servers:
            raise ValueError(
                'eval_engine "vllm" runs the evaluations in this process; agent_servers load each '
                "policy themselves: set one of them"
            )
        return self

    @model_validator(mode="after")
    def _processes_can_train(self) -> LifecycleConfig:
        n = self.train_processes
        if n == 1:
            return self
        one_process = {
            "envs (a mix of environments)": self.envs is not None,
            f'grpo.rollout engine "{self.grpo.rollout.engine}"': self.grpo.rollout.engine
            != "local",
        }
        for what, present in one_process.items():
            if present:
                raise ValueError(f"{what} trains in one process: with it, set train_processes 1")
        for what, batch in (
            ("sft.batch_size", self.sft.batch_size),
            ("grpo.prompts_per_step", self.grpo.prompts_per_step),
        ):
            if batch % n:
                raise ValueError(
                    f"{what} {batch} does not split over train_processes {n}: make it a "
                    f"multiple of {n}"
                )
        return self

    @model_validator(mode="after")
    def _splits_leave_training_data(self) -> LifecycleConfig:
        if self.heldout_frac + self.val_frac >= 0.9:
            raise ValueError(
                f"heldout_frac + val_frac = {self.heldout_frac + self.val_frac:g} leaves under "
                "10 % of the tasks for training; keep their sum below 0.9"
            )
        return self

    @property
    def env_weights(self) -> dict[str, float]:
        """The run's environments and their weights (one environment: weight 1)."""
        return dict(self.envs) if self.envs is not None else {self.env: 1.0}

    @property
    def env_label(self) -> str:
        """``tool_call``, or a mix's environments joined by ``+`` (``tool_call+math``)."""
        return "+".join(self.env_weights)

    @property
    def model_name(self) -> str:
        """The registered model's name (``registered_model``, else from the environments)."""
        from gymflow.lifecycle.model_registry import registered_name

        if self.registered_model:
            return self.registered_model
        if self.envs is None:
            return registered_name(self.env)
        return registered_name("mix-" + "-".join(sorted(self.envs)))

    def overridden(self, changes: dict) -> LifecycleConfig:
        """This config with ``changes`` applied field by field, nested settings included
        (``{"grpo": {"learning_rate": 2e-4}}`` keeps every other GRPO setting). ``envs``
        without ``env`` makes the mix's first the env; ``env`` without ``envs`` ends a mix."""

        def merge(base: dict, new: dict) -> dict:
            out = dict(base)
            for key, value in new.items():
                nested = isinstance(value, dict) and isinstance(base.get(key), dict)
                if nested and value.get("engine", base[key].get("engine")) != base[key].get(
                    "engine"
                ):  # another variant of a tagged union (grpo.rollout): its settings anew
                    nested = False
                out[key] = merge(base[key], value) if nested else value
            return out

        base = self.model_dump()
        if "envs" in changes and "env" not in changes:
            base.pop("env")
        elif "env" in changes and "envs" not in changes:
            base["envs"] = None
        becomes_mix = changes.get("envs", base["envs"]) is not None
        given = "task_sampling" in changes.get("grpo", {})
        if becomes_mix != (self.envs is not None) and not given:
            base["grpo"].pop("task_sampling")  # its default differs between one env and a mix
        return self.model_validate(merge(base, changes))

    def digest(self) -> str:
        # where the run is tracked is not what it computes: the same on every machine
        blob = json.dumps(self.model_dump(exclude={"tracking"}), sort_keys=True)
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
            # steps, not wall time: the smoke run's tests count its steps on any machine
            sft=SFTSettings(
                max_steps=30, batch_size=16, eval_every=15, warmup_steps=5, time_budget_s=None
            ),
            grpo=GRPOSettings(
                max_steps=3,
                prompts_per_step=2,
                num_generations=4,
                save_every=2,
                max_resample_rounds=1,
            ),
            gate=GateSettings(general_envs=["games"], general_n=8),
        )
