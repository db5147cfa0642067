"""The gate's settings (``LifecycleConfig.gate``): its level, how it looks, its guardrails.

Every field is documented once, here; ``docs/concepts/gate.md`` says why each is what it is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gymflow.data.data_catalog import SETS, unknown_set_text


class GateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(
        0.05,
        gt=0,
        lt=0.5,
        description="Highest chance that the gate promotes a candidate that does not beat the "
        "start (and the champion), wherever it stops; split evenly over the candidates.",
    )
    sequential: bool = Field(
        True,
        description="Evaluate held-out (and guardrail) tasks in batches in a seeded random "
        "order and stop once every verdict is settled; false: every task, then decide (the "
        "same rule; for runs whose held-out figures must cover the whole set).",
    )
    batch: int = Field(32, ge=1, description="Tasks evaluated between two looks.")
    min_n: int = Field(
        32, ge=1, description="Tasks a comparison needs before it can pass (a minimum n)."
    )
    settle_choice: bool = Field(
        False,
        description="When both candidates pass, go on until GRPO − control is settled (or "
        "every task is used) before choosing; false: choose at the stop (GRPO only if "
        "already shown above its control, else the control).",
    )
    futility_gain: float = Field(
        0.05,
        ge=0,
        le=1,
        description="A candidate shown to gain less than this over the start (or the "
        "champion) — its upper bound under it before its lower bound passed 0 — is refused "
        "without more tasks (a candidate equal to its start would otherwise use every task); "
        "0: only a shown loss is.",
    )
    min_delta_success: float = Field(
        0.0, ge=-1, le=1, description="Held-out success gain required (point estimate)."
    )
    require_ci_above_zero: bool = Field(
        True, description="The gain's confidence-sequence lower bound must exceed 0."
    )
    max_well_formed_drop: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Allowed drop in the rate of well-formed answers (the environment's format check, Environment.well_formed).",
    )
    max_unsafe_increase: float = Field(
        0.01, ge=0, le=1, description="Allowed rise in unsafe-action rate."
    )
    latency: Literal["tokens", "seconds"] = Field(
        "tokens",
        description="Latency measure: p95 completion tokens per episode (fixed under greedy "
        "decoding) or p95 seconds per episode (varies with the machine's load).",
    )
    max_latency_rise: float = Field(
        0.25,
        ge=0,
        description="Allowed relative rise of p95 latency (0.25 = +25 %); a rise breaks the "
        "guardrail only when it is over this and over the absolute floor as well.",
    )
    latency_floor_tokens: float = Field(
        8.0,
        ge=0,
        description="With latency tokens: a rise of p95 completion tokens per episode up to this "
        "many tokens is never a regression, whatever its share (a one-token answer that "
        "becomes three is +200 % and nothing a user waits for).",
    )
    latency_floor_s: float = Field(
        0.1,
        ge=0,
        description="With latency seconds: a rise of p95 seconds per episode up to this is never "
        "a regression, whatever its share.",
    )
    general_envs: list[str] = Field(
        default_factory=lambda: ["math", "games"],
        description="General capability: held-out sets of these environments (any the run "
        "trains on is skipped), measured by general_measure.",
    )
    general_measure: Literal["gold_probability", "success"] = Field(
        "gold_probability",
        description="On general_envs: the per-token probability of each task's gold answer "
        "(teacher-forced, a forward pass: a tool_call start that solves no math task still "
        "has something to lose there), or greedy success.",
    )
    general_n: int = Field(256, ge=1, description="Held-out tasks per general environment.")
    general_margin: float = Field(
        0.05,
        gt=0,
        le=1,
        description="Non-inferiority margin of general capability: a candidate must be shown "
        "to lose at most this much (success, or gold-answer probability) against the start; "
        "a set where the start scores at most this is skipped (nothing to lose).",
    )
    general_sets: list[str] = Field(
        default_factory=list,
        description="General capability on public benchmarks: external held-out sets "
        "(bfcl:simple_python, bfcl:live_simple; fetched from the package registry on first "
        "use), greedy success of the start and every candidate, with general_margin.",
    )
    general_sets_n: int = Field(
        100, ge=1, description="Tasks per external set: its first N in the file's order."
    )
    verdict_margin: float = Field(
        0.05,
        gt=0.0,
        le=1.0,
        description="The RL verdict's non-inferiority margin: a control whose GRPO − control "
        "upper bound is under it is shown not worse than GRPO by more than it "
        "(cheaper_suffices); the five points of futility_gain by default "
        "(gymflow.eval.verdict).",
    )
    pass_k: int = Field(
        8,
        ge=0,
        description="pass@k beside greedy pass@1 for the start and every arm: k samples per "
        "task at temperature 1 (the unbiased estimator of Chen et al. 2021); 0: none.",
    )
    pass_k_tasks: int = Field(
        32,
        ge=1,
        description="Held-out tasks pass@k is measured on: the first ones in the gate's order.",
    )
    drift_max_flip_share: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Verifier drift sentinel: the run stops (verifier_drift) when more than "
        "this share of the champion's stored held-out verdicts flip under the current verifier.",
    )

    @field_validator("general_sets")
    @classmethod
    def _known_sets(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in SETS:
                raise ValueError(unknown_set_text(name))
        return list(dict.fromkeys(value))

    def candidate_alpha(self, candidates: int) -> float:
        """Each candidate's level: ``alpha`` split over them (a union bound)."""
        return self.alpha / max(1, candidates)
