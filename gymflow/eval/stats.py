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


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` succeeded:
    ``1 - C(n - c, k) / C(n, k)``, the chance that ``k`` of the ``n`` samples drawn without
    replacement hold at least one success (Chen et al. 2021, "Evaluating Large Language Models
    Trained on Code"). Exact integer binomials, so no rounding before the one division.

    >>> pass_at_k(5, 2, 2)  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
    0.7
    >>> pass_at_k(4, 1, 1), pass_at_k(4, 0, 4), pass_at_k(4, 1, 4)
    (0.25, 0.0, 1.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:  # every draw of k holds a success
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics
    (numpy's default method); 0.0 for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([1.0, 2.0, 3.0, 4.0], 95)
    (2.5, 3.85)
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile needs 0 <= q <= 100, got {q}")
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
