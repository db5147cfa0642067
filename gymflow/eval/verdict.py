"""Is RL worth it here? The verdict per environment from GRPO's held-out evidence against each control.

The controls are the cheap alternatives trained from the same start: the SFT control (more
imitation of the demonstrations) and online RFT (imitation of the policy's own verified samples,
:mod:`gymflow.train.rft`). For each, the gate's paired held-out evidence GRPO − control
(:class:`~gymflow.eval.evidence.Paired`: the same tasks, the same seeds, an anytime-valid
confidence sequence) decides one of three verdicts:

* ``rl_pays`` — GRPO is shown above **every** control: each lower bound of GRPO − control is
  above 0. The gate's own rule for promoting GRPO over a control, so the verdict and the gate
  never disagree about it.
* ``cheaper_suffices`` — some control is shown **not worse** than GRPO within the
  non-inferiority margin: the upper bound of GRPO − control is under ``margin`` (GRPO's edge
  over it, if any, is shown to be smaller than the margin). The first such control in the
  order given (cheapest first) is named.
* ``undecided`` — neither: the intervals still straddle what would decide it; more held-out
  tasks (or a larger difference) would.

``rl_pays`` is checked first: GRPO shown above every control is the gate's reason to promote
it, even when its edge is also shown to be under the margin. The margin is
:data:`DEFAULT_MARGIN` (five points of success) unless a run sets another: the gate's own
``futility_gain``, the gain it calls not worth more tasks, so "cheaper suffices" means the same
five points the gate would refuse a candidate for. Showing non-inferiority within five points
takes more tasks than showing a large gain (the run's margin: ``gate.verdict_margin``): two arms that are truly equal and disagree on a
fifth of the tasks keep an upper bound above 0.05 over a few hundred tasks at the gate's
per-candidate level; such a run says ``undecided``, which is the honest answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gymflow.eval.evidence import Paired, paired

VerdictKind = Literal["rl_pays", "cheaper_suffices", "undecided"]
DEFAULT_MARGIN = 0.05
"""Five points of held-out success: the gate's ``futility_gain`` (see the module docstring)."""


class ControlEvidence(BaseModel):
    """GRPO − one control on held-out success, and what it shows."""

    model_config = ConfigDict(frozen=True)

    control: str
    delta: float
    cs: list[float]
    n: int
    grpo_above: bool
    """The lower bound is above 0: GRPO shown better than this control."""
    within_margin: bool
    """The upper bound is under the margin: this control shown not worse by more than it."""

    def text(self) -> str:
        lo, hi = self.cs
        return (
            f"GRPO − {self.control} {100 * self.delta:+.1f} points "
            f"(CS [{100 * lo:+.1f}, {100 * hi:+.1f}], n={self.n})"
        )


class RLVerdict(BaseModel):
    """The verdict, the intervals that decide it, and one sentence for reports."""

    model_config = ConfigDict(frozen=True)

    verdict: VerdictKind
    margin: float
    decided_by: list[str] = Field(default_factory=list)
    """The controls whose intervals decide it (every one for rl_pays and undecided)."""
    evidence: list[ControlEvidence] = Field(default_factory=list)
    sentence: str


def rl_verdict(grpo_minus: Mapping[str, Paired], margin: float = DEFAULT_MARGIN) -> RLVerdict:
    """The verdict from GRPO − control per control (cheapest control first).

    >>> from gymflow.eval.evidence import paired
    >>> rl_verdict({"sft_control": paired([1] * 200, [0] * 200, 0.025)}).verdict
    'rl_pays'
    """
    if not grpo_minus:
        raise ValueError("the verdict needs GRPO − control for at least one control")
    evidence = [
        ControlEvidence(
            control=name, delta=p.delta, cs=list(p.cs), n=p.n,
            grpo_above=p.cs[0] > 0, within_margin=p.cs[1] < margin,
        )
        for name, p in grpo_minus.items()
    ]  # fmt: skip
    points = f"{100 * margin:g} points"
    if all(e.grpo_above for e in evidence):
        names = [e.control for e in evidence]
        shown = "; ".join(e.text() for e in evidence)
        sentence = f"RL pays here: GRPO is shown above every cheaper arm ({shown})."
        return RLVerdict(verdict="rl_pays", margin=margin, decided_by=names,
                         evidence=evidence, sentence=sentence)  # fmt: skip
    enough = [e for e in evidence if e.within_margin]
    if enough:
        e = enough[0]
        sentence = (
            f"A cheaper arm suffices here: {e.control} is shown not worse than GRPO by more "
            f"than {points} ({e.text()})."
        )
        return RLVerdict(verdict="cheaper_suffices", margin=margin, decided_by=[e.control],
                         evidence=evidence, sentence=sentence)  # fmt: skip
    shown = "; ".join(e.text() for e in evidence)
    sentence = (
        f"Undecided: GRPO is not shown above every cheaper arm, nor is any shown within "
        f"{points} of it ({shown})."
    )
    return RLVerdict(verdict="undecided", margin=margin, decided_by=[e.control for e in evidence],
                     evidence=evidence, sentence=sentence)  # fmt: skip


def grpo_versus_controls(
    success: Mapping[str, Sequence[float]], controls: Sequence[str], alpha: float
) -> dict[str, Paired]:
    """GRPO − each control from per-task held-out success in the gate's order (``success``:
    arm name → one value per task, ``"grpo"`` among them), on the tasks both were evaluated on
    (a sequential gate may have stopped one arm earlier)."""
    out = {}
    for name in controls:
        n = min(len(success["grpo"]), len(success[name]))
        out[name] = paired(success["grpo"][:n], success[name][:n], alpha)
    return out
