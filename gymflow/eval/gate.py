"""The held-out gate: of the candidates (the GRPO policy, the SFT control), promote the best one
only if it beats the start significantly with no guardrail broken.

:func:`decide` judges one candidate against the start (the policy GRPO started from): a
significant success gain, no drop in valid-JSON rate and no rise in unsafe-action rate beyond
the margins. :func:`choose` judges every candidate that way and picks, among those that pass,
the one with the highest held-out success, so a GRPO policy that loses to its own SFT control
is never promoted over it. The decision says which candidate and why, GRPO − control included.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_delta_success: float = Field(
        0.0, ge=-1, le=1, description="Held-out success gain required (point estimate)."
    )
    require_ci_above_zero: bool = Field(
        True, description="The gain's 95 % CI lower bound must exceed 0."
    )
    max_valid_json_drop: float = Field(
        0.02, ge=0, le=1, description="Allowed drop in valid-JSON rate."
    )
    max_unsafe_increase: float = Field(
        0.01, ge=0, le=1, description="Allowed rise in unsafe-action rate."
    )


class Verdict(BaseModel):
    """One candidate against the start: its held-out success, the paired gain, pass or not."""

    model_config = ConfigDict(frozen=True)

    candidate: str
    passed: bool
    reason: str
    success: float
    delta_success: float
    ci95: list[float]


class GateResult(BaseModel):
    """The gate's decision; ``summary.json`` and the registry's tags carry it as is.

    ``chosen`` is the promoted candidate when ``passed``; otherwise the best-scoring one (which
    is registered as ``challenger`` for inspection, never as ``champion``).
    """

    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: str
    chosen: str | None = None
    grpo_minus_control: float | None = None
    grpo_minus_control_ci95: list[float] | None = None
    verdicts: list[Verdict] = Field(default_factory=list)


class Candidate(BaseModel):
    """What the gate is given about one candidate: its held-out summary and the paired
    success difference against the start (``{"delta", "ci95"}``)."""

    name: str
    summary: dict
    delta: dict


def decide(baseline: dict, candidate: dict, delta: dict, settings: GateSettings) -> GateResult:
    """``baseline``/``candidate`` are eval summaries; ``delta`` is the paired success difference."""
    lo, hi = delta["ci95"]
    d = delta["delta"]
    if d < settings.min_delta_success:
        return GateResult(
            passed=False,
            reason=f"success gain {d:+.3f} below required {settings.min_delta_success:+.3f}",
        )
    if settings.require_ci_above_zero and lo <= 0:
        return GateResult(
            passed=False,
            reason=f"success gain {d:+.3f} not significant (95% CI [{lo:+.3f}, {hi:+.3f}])",
        )
    drop = baseline["valid_json"] - candidate["valid_json"]
    if drop > settings.max_valid_json_drop:
        return GateResult(
            passed=False,
            reason=f"valid-JSON rate fell by {drop:.3f} (> {settings.max_valid_json_drop})",
        )
    rise = candidate["unsafe_rate"] - baseline["unsafe_rate"]
    if rise > settings.max_unsafe_increase:
        return GateResult(
            passed=False,
            reason=f"unsafe-action rate rose by {rise:.3f} (> {settings.max_unsafe_increase})",
        )
    return GateResult(
        passed=True, reason=f"success {d:+.3f} (95% CI [{lo:+.3f}, {hi:+.3f}]), no regression"
    )


def choose(
    baseline: dict,
    candidates: list[Candidate],
    settings: GateSettings,
    grpo_minus_control: dict | None = None,
) -> GateResult:
    """Judge every candidate against the start; promote the best of those that pass.

    Best = highest held-out success; a tie goes to the candidate listed first. When none
    passes, ``chosen`` is the best-scoring candidate and ``passed`` is False.
    ``grpo_minus_control`` is the paired difference GRPO − SFT control (``{"delta", "ci95"}``).
    """
    if not candidates:
        raise ValueError("the gate needs at least one candidate")
    verdicts = []
    for c in candidates:
        one = decide(baseline, c.summary, c.delta, settings)
        verdicts.append(
            Verdict(
                candidate=c.name,
                passed=one.passed,
                reason=one.reason,
                success=c.summary["success"],
                delta_success=c.delta["delta"],
                ci95=list(c.delta["ci95"]),
            )
        )
    passing = [v for v in verdicts if v.passed]
    pool = passing or verdicts
    best = max(pool, key=lambda v: v.success)  # max keeps the first of equals
    versus = _versus_control(grpo_minus_control)
    if passing:
        head = f"promoted {best.candidate}: held-out success {best.success:.3f}, {best.reason}"
    else:
        head = f"nothing promoted: no candidate beats the start ({_list(verdicts)})"
    others = [v for v in verdicts if v is not best] if passing else []
    tail = "".join(f"; {v.candidate}: {_verdict_text(v)}" for v in others)
    gmc = grpo_minus_control or {}
    return GateResult(
        passed=bool(passing),
        reason=head + versus + tail,
        chosen=best.candidate,
        grpo_minus_control=gmc.get("delta"),
        grpo_minus_control_ci95=list(gmc["ci95"]) if gmc else None,
        verdicts=verdicts,
    )


def _versus_control(delta: dict | None) -> str:
    if not delta:
        return ""
    lo, hi = delta["ci95"]
    return (
        f"; GRPO − control {100 * delta['delta']:+.1f} points "
        f"(95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}])"
    )


def _verdict_text(v: Verdict) -> str:
    state = "passes too" if v.passed else "fails"
    return f"success {v.success:.3f}, {state} ({v.reason})"


def _list(verdicts: list[Verdict]) -> str:
    return "; ".join(f"{v.candidate}: {v.reason}" for v in verdicts)
