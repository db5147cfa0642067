"""The gate's evidence for one comparison: a paired difference and its confidence sequence.

Every comparison the gate makes is paired (two policies on the same tasks, in the gate's
seeded order) and judged against a *mark*: 0 for a gain ("is the candidate better than the
start?"), minus the margin for a guardrail ("has it lost no more than the margin?"). The
comparison is *settled* once the confidence sequence (:mod:`gymflow.eval.sequential`) has
left the mark behind: ``above`` (its lower bound passed the mark) or ``below`` (its upper bound
fell under it). Until then more tasks may change the answer; after, they cannot (the bounds
only tighten), which is what lets the gate stop early.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from gymflow.eval.sequential import ConfidenceSequence


class Paired(BaseModel):
    """A − B over the first ``n`` tasks: mean difference, confidence sequence, settled or not."""

    model_config = ConfigDict(frozen=True)

    delta: float
    n: int
    cs: list[float]
    """``[lower, upper]``: each bound holds with probability 1 - alpha at every n at once."""
    alpha: float
    mark: float = 0.0
    above: bool = False
    """The lower bound passed ``mark``: A − B is shown to exceed it."""
    below: bool = False
    """The upper bound fell under ``mark``: A − B is shown to be below it."""
    above_at: int = 0
    """After how many tasks ``above`` first held (0: not yet)."""
    below_at: int = 0
    short_at: int = 0
    """After how many tasks the upper bound first fell under ``short_of`` (0: not yet)."""
    short_of: float | None = None
    """A gain too small to be worth it (``GateSettings.futility_gain``), when asked."""

    @property
    def settled(self) -> bool:
        return self.above or self.below

    def text(self, scale: float = 1.0, unit: str = "") -> str:
        """``+0.215 (CS [+0.130, +0.300], n=64)``; ``scale`` 100 with ``unit`` " points"."""
        lo, hi = self.cs
        digits = 1 if scale == 100 else 3
        return (
            f"{scale * self.delta:+.{digits}f}{unit} "
            f"(CS [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}], n={self.n})"
        )


def paired(
    a: Sequence[float],
    b: Sequence[float],
    alpha: float,
    mark: float = 0.0,
    span: float = 1.0,
    short_of: float | None = None,
) -> Paired:
    """``a`` − ``b`` task by task (values in ``[0, span]``, same tasks in the same order);
    with ``short_of``, also when the upper bound first fell under it (``short_at``).

    >>> p = paired([1, 1, 1], [0, 0, 0], alpha=0.05)
    >>> (p.delta, p.n, p.above)  # 3 of 3 improved is not significant
    (1.0, 3, False)
    """
    if len(a) != len(b):
        raise ValueError(f"paired comparison needs equal lengths, got {len(a)} and {len(b)}")
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    cs = ConfidenceSequence(alpha, alpha, -span, span)
    bounds = cs.bounds(diffs)
    above_at, below_at = cs.first(diffs, mark, +1), cs.first(diffs, mark, -1)
    return Paired(
        delta=bounds.mean,
        n=len(diffs),
        cs=[bounds.lower, bounds.upper],
        alpha=alpha,
        mark=mark,
        above=above_at > 0,
        below=below_at > 0,
        above_at=above_at,
        below_at=below_at,
        short_at=cs.first(diffs, short_of, -1) if short_of is not None else 0,
        short_of=short_of,
    )
