"""The result of verifying one trajectory: reward, its components and a failure kind."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gymflow.core.failures import FailureKind


@dataclass(frozen=True)
class Score:
    """What a verifier returns. ``success`` means the task was fully done (not merely rewarded)."""

    reward: float
    success: bool
    failure_kind: FailureKind | None = None
    components: dict[str, float] = field(default_factory=dict)
    detail: str = ""

    def to_dict(self) -> dict:
        out = asdict(self)
        out["failure_kind"] = str(self.failure_kind) if self.failure_kind else None
        return out
