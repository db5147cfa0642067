"""Anytime-valid confidence sequences for a paired mean, by betting.

The gate compares policies on the same tasks, one paired difference per task (success of the
candidate minus success of the start: -1, 0 or +1; or a gold answer's probability under each:
a number in [-1, 1]), and looks at the running differences after every batch of tasks. A
confidence interval made for one fixed n is not valid when one looks repeatedly and stops as
soon as it excludes 0; a *confidence sequence* is: with probability at least 1 - alpha its
bound holds at every n at once (Waudby-Smith & Ramdas 2023, "Estimating means of bounded
random variables by betting", JRSS-B), so the gate may stop whenever it likes.

The construction (their predictable plug-in "PrPl" bets, one side at a time): observations
``z`` in ``[lo, hi]`` are rescaled to ``x`` in [0, 1]. For a candidate mean ``m`` a gambler
who bets that the mean is above ``m`` multiplies its capital by ``1 + lam_t (x_t - m)`` at
each task, with a bet ``lam_t`` fixed before ``x_t`` is seen (from the running mean and
variance of the earlier ones) and capped at ``c / m`` so the capital stays positive. If the
true mean is at most ``m`` the capital is a nonnegative supermartingale, so by Ville's
inequality it ever reaches ``1 / alpha`` with probability at most ``alpha``. The lower bound
after n tasks is the largest ``m`` whose capital has reached ``1 / alpha`` at some n' <= n (the
running intersection: bounds only tighten). The capital is non-increasing in ``m`` (the bet
does not depend on ``m`` below its cap), so the rejected means form an interval and the bound
is found by bisection. The upper bound is the mirror image.

A lower bound above 0 after some batch is a significant gain whenever the gate stopped; the
bet can grow capital only so fast (at most ``1 + c`` a task), so a handful of tasks can never
be significant: 3 improvements out of 3 reach capital 1.75**3 = 5.4 < 1 / 0.05.

:func:`first_crossings` is the same computation for many sequences at once (the simulation in
``benchmarks/gate.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BET_CAP = 0.75
"""``c``: the largest share of its capital the gambler may lose on one task (WSR use 1/2 or
3/4): higher grows faster when the mean is far from ``m``, risks more on one bad task."""


@dataclass(frozen=True)
class Bounds:
    """The running confidence sequence after ``n`` observations: ``lower`` holds at level
    ``alpha_lower``, ``upper`` at ``alpha_upper`` (each one-sided, at every n at once)."""

    n: int
    mean: float
    lower: float
    upper: float

    def text(self, scale: float = 1.0, digits: int = 3) -> str:
        return f"[{scale * self.lower:+.{digits}f}, {scale * self.upper:+.{digits}f}]"


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """PrPl bets for observations ``x`` in [0, 1] along the last axis: bet t uses only the
    first t - 1 observations (the running mean and variance, started at 1/2 and 1/4)."""
    t = np.arange(1, x.shape[-1] + 1)
    mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    spread = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), spread[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(1 / alpha) / (before * t * np.log1p(t)))


def _log_capital(x: np.ndarray, bets: np.ndarray, m: float, side: int) -> np.ndarray:
    """Running log capital of betting that the mean of ``x`` is above (``side`` +1) or below
    (-1) ``m`` (all in [0, 1])."""
    room = m if side > 0 else 1.0 - m
    if room <= 0:  # the mean cannot be beyond the edge of the range: nothing to win
        return np.full(x.shape, -np.inf if side > 0 else 0.0)
    lam = np.minimum(bets, BET_CAP / room)
    return np.cumsum(np.log1p(side * lam * (x - m)), axis=-1)


class ConfidenceSequence:
    """A running confidence sequence for the mean of observations in ``[lo, hi]``.

    >>> cs = ConfidenceSequence(alpha_lower=0.05, alpha_upper=0.05)
    >>> cs.bounds([1.0, 1.0, 1.0]).lower < 0  # 3 of 3 improved: not significant
    True
    >>> cs.above([1.0] * 3, 0.0), cs.above([1.0] * 10, 0.0)
    (False, True)
    """

    def __init__(self, alpha_lower: float, alpha_upper: float, lo: float = -1.0, hi: float = 1.0):
        if not (0 < alpha_lower < 1 and 0 < alpha_upper < 1 and lo < hi):
            raise ValueError(f"need 0 < alpha < 1 and lo < hi, got {alpha_lower, alpha_upper}")
        self.alpha_lower, self.alpha_upper, self.lo, self.hi = alpha_lower, alpha_upper, lo, hi

    def _scaled(self, values: Sequence[float]) -> np.ndarray:
        z = np.asarray(values, dtype=float)
        if z.size and (z.min() < self.lo - 1e-9 or z.max() > self.hi + 1e-9):
            raise ValueError(f"observations must lie in [{self.lo}, {self.hi}]")
        return np.clip((z - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def _m(self, value: float) -> float:
        return (value - self.lo) / (self.hi - self.lo)

    def _reached(self, x: np.ndarray, m: float, side: int, alpha: float) -> bool:
        if not x.size:
            return False
        log_k = _log_capital(x, _bets(x, alpha), m, side)
        return bool(log_k.max() >= math.log(1 / alpha))

    def first(self, values: Sequence[float], m: float, side: int) -> int:
        """After how many values the lower bound first passed ``m`` (``side`` +1) or the upper
        bound first fell under it (-1); 0 if it has not."""
        alpha = self.alpha_lower if side > 0 else self.alpha_upper
        x = self._scaled(values)
        if not x.size:
            return 0
        log_k = _log_capital(x, _bets(x, alpha), self._m(m), side)
        hit = np.flatnonzero(log_k >= math.log(1 / alpha))
        return int(hit[0]) + 1 if hit.size else 0

    def above(self, values: Sequence[float], m: float) -> bool:
        """Whether the lower bound has passed ``m``: the mean is shown to exceed ``m``."""
        return self._reached(self._scaled(values), self._m(m), +1, self.alpha_lower)

    def below(self, values: Sequence[float], m: float) -> bool:
        """Whether the upper bound has fallen under ``m``: the mean is shown to be below it."""
        return self._reached(self._scaled(values), self._m(m), -1, self.alpha_upper)

    def bounds(self, values: Sequence[float], tol: float = 1e-6) -> Bounds:
        """The running bounds after ``values`` (bisection to ``tol`` in the observations' units,
        rounded outwards)."""
        x = self._scaled(values)
        n = int(x.size)
        mean = float(np.mean(values)) if n else 0.0
        if not n:
            return Bounds(0, 0.0, self.lo, self.hi)
        lower = self._edge(x, +1, self.alpha_lower, tol / (self.hi - self.lo))
        upper = self._edge(x, -1, self.alpha_upper, tol / (self.hi - self.lo))
        span = self.hi - self.lo
        return Bounds(n, mean, self.lo + span * lower, self.lo + span * upper)

    def _edge(self, x: np.ndarray, side: int, alpha: float, tol: float) -> float:
        """Lower (``side`` +1) or upper (-1) bound in [0, 1]: the edge of the rejected means,
        returned from their side (the interval errs wider by less than ``tol``)."""
        bets = _bets(x, alpha)
        threshold = math.log(1 / alpha)

        def rejected(m: float) -> bool:
            return bool(_log_capital(x, bets, m, side).max() >= threshold)

        # rejected means lie below the lower bound and above the upper; the far edge never is
        beyond, within = (tol, 1.0) if side > 0 else (1.0 - tol, 0.0)
        if not rejected(beyond):
            return 0.0 if side > 0 else 1.0
        while abs(within - beyond) > tol:
            mid = (within + beyond) / 2
            if rejected(mid):
                beyond = mid
            else:
                within = mid
        return beyond


def first_crossings(
    differences: np.ndarray, m: float, alpha: float, side: int = +1, lo: float = -1.0,
    hi: float = 1.0,
) -> np.ndarray:  # fmt: skip
    """For each row of ``differences`` (sequences in ``[lo, hi]``), the number of observations
    after which the bound first passes ``m`` (``side`` +1: the lower bound rises above it; -1:
    the upper bound falls under it), or ``0`` where it never does."""
    x = np.clip((np.asarray(differences, dtype=float) - lo) / (hi - lo), 0.0, 1.0)
    log_k = _log_capital(x, _bets(x, alpha), (m - lo) / (hi - lo), side)
    hit = log_k >= math.log(1 / alpha)
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, 0)
