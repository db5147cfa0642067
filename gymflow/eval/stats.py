"""Confidence intervals for rates and paired differences (normal approximation / Wilson)."""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion.

    >>> [round(x, 3) for x in wilson(50, 100)]
    [0.404, 0.596]
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson needs 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exact at the edges: rounding would otherwise give a lower bound of 5e-17 above p = 0
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def mean_ci(values: list[float], z: float = Z95) -> tuple[float, float]:
    """Normal-approximation interval for a mean (used for rewards and paired differences)."""
    n = len(values)
    if n == 0:
        return (0.0, 0.0)
    mean = sum(values) / n
    if n == 1:
        return (mean, mean)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return (mean - half, mean + half)


def paired_delta(candidate: list[float], baseline: list[float]) -> dict:
    """Mean of per-task differences with its 95 % interval (paired: same tasks, same order)."""
    if len(candidate) != len(baseline):
        raise ValueError(
            f"paired comparison needs equal lengths, got {len(candidate)} and {len(baseline)}"
        )
    diffs = [c - b for c, b in zip(candidate, baseline, strict=True)]
    lo, hi = mean_ci(diffs)
    return {"delta": sum(diffs) / max(1, len(diffs)), "ci95": [lo, hi]}
