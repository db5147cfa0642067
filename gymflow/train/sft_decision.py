"""Whether the lifecycle runs SFT before GRPO, and why, in words a run report can quote.

GRPO learns from the differences between samples that succeed and samples that do not; a start
that never answers in the environment's format gives it none. So by default (``sft.run =
"auto"``) SFT runs when the baseline's rate of well-formed answers — the environment's own
format check, :meth:`gymflow.env.environment.Environment.well_formed` — is under
``format_threshold`` on any environment of the run. ``"always"`` and ``"never"`` decide
without the baseline.

>>> decide_sft("auto", {"tool_call": 0.42}, 0.8).reason
'the baseline answered in the format of tool_call 42 % of the time, under format_threshold 80 %'
>>> decide_sft("auto", {"tool_call": 0.95}, 0.8).run
False
>>> decide_sft("never", {"tool_call": 0.0}, 0.8).reason
'sft.run is "never"'
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

SFTRun = Literal["auto", "always", "never"]


class SFTDecision(BaseModel):
    """What was decided, and the sentence that says why."""

    run: bool
    reason: str


def decide_sft(mode: SFTRun, well_formed: dict[str, float], threshold: float) -> SFTDecision:
    """``well_formed``: the baseline's rate of well-formed answers per environment."""
    if mode != "auto":
        return SFTDecision(run=mode == "always", reason=f'sft.run is "{mode}"')
    under = {env: rate for env, rate in well_formed.items() if rate < threshold}
    shown = under or well_formed
    rates = ", ".join(f"{env} {100 * rate:.0f} %" for env, rate in sorted(shown.items()))
    where = "under" if under else "at or above"
    return SFTDecision(
        run=bool(under),
        reason=f"the baseline answered in the format of {rates} of the time, {where} "
        f"format_threshold {100 * threshold:.0f} %",
    )
