"""Wilson intervals, normal-approximation mean intervals and paired deltas."""

from __future__ import annotations

import math

import pytest

from gymflow.eval.stats import Z95, mean_ci, paired_delta, wilson


def test_z95_is_the_two_sided_95_quantile():
    assert math.erf(Z95 / math.sqrt(2)) == pytest.approx(0.95, abs=1e-12)


@pytest.mark.parametrize(
    ("successes", "n", "lo", "hi"),
    [
        # reference values from scipy.stats.binomtest(k, n).proportion_ci(method="wilson")
        (50, 100, 0.403832, 0.596168),
        (0, 10, 0.0, 0.277533),
        (10, 10, 0.722467, 1.0),
        (1, 10, 0.017876, 0.404150),
        (81, 263, 0.255289, 0.366210),
        (5, 5, 0.565518, 1.0),
    ],
)
def test_wilson_known_values(successes, n, lo, hi):
    got_lo, got_hi = wilson(successes, n)
    assert got_lo == pytest.approx(lo, abs=1e-6)
    assert got_hi == pytest.approx(hi, abs=1e-6)


def test_wilson_matches_scipy_on_a_grid():
    stats = pytest.importorskip("scipy.stats")
    for n in (1, 3, 17, 64, 500):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            assert wilson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-9)


def test_wilson_closed_form_at_zero_successes():
    n = 20
    assert wilson(0, n)[1] == pytest.approx(Z95**2 / (n + Z95**2))


def test_wilson_is_symmetric_and_bounded():
    for n in (1, 2, 7, 100, 1000):
        for s in range(0, n + 1, max(1, n // 7)):
            lo, hi = wilson(s, n)
            assert 0.0 <= lo <= s / n <= hi <= 1.0
            mirror_lo, mirror_hi = wilson(n - s, n)
            assert lo == pytest.approx(1 - mirror_hi, abs=1e-12)
            assert hi == pytest.approx(1 - mirror_lo, abs=1e-12)


def test_wilson_narrows_with_more_data():
    widths = [wilson(n // 2, n)[1] - wilson(n // 2, n)[0] for n in (10, 100, 1000, 10000)]
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < 0.02


def test_wilson_accepts_fractional_successes_and_other_z():
    lo, hi = wilson(2.5, 10)
    assert lo < 0.25 < hi
    narrow, wide = wilson(5, 10, z=1.0), wilson(5, 10, z=3.0)
    assert wide[0] < narrow[0] and wide[1] > narrow[1]


def test_wilson_without_data_is_uninformative():
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("successes", "n"), [(11, 10), (-1, 10), (1, -5), (0, -1)])
def test_wilson_refuses_impossible_counts(successes, n):
    with pytest.raises(ValueError, match="successes"):
        wilson(successes, n)


def test_mean_ci_known_values():
    lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0])
    half = Z95 * math.sqrt((5 / 3) / 4)  # sample variance 5/3
    assert (lo, hi) == pytest.approx((2.5 - half, 2.5 + half))


def test_mean_ci_degenerate_inputs():
    assert mean_ci([]) == (0.0, 0.0)
    assert mean_ci([0.7]) == (0.7, 0.7)
    lo, hi = mean_ci([0.25] * 9)
    assert lo == pytest.approx(0.25) and hi == pytest.approx(0.25)


def test_paired_delta_uses_per_task_differences():
    candidate = [1.0, 0.5, 0.0, 1.0]
    baseline = [0.0, 0.5, 0.0, 0.5]
    result = paired_delta(candidate, baseline)
    assert result["delta"] == pytest.approx(0.375)
    assert result["ci95"] == pytest.approx(list(mean_ci([1.0, 0.0, 0.0, 0.5])))
    lo, hi = result["ci95"]
    assert lo < result["delta"] < hi


def test_paired_delta_of_a_constant_shift_has_no_spread():
    baseline = [0.1, -0.4, 0.9, 0.3]
    result = paired_delta([b + 0.2 for b in baseline], baseline)
    assert result["delta"] == pytest.approx(0.2)
    assert result["ci95"] == pytest.approx([0.2, 0.2])


def test_paired_delta_is_antisymmetric():
    a, b = [0.2, 0.9, -1.0, 0.4], [0.1, 0.3, 0.5, 0.5]
    forward, backward = paired_delta(a, b), paired_delta(b, a)
    assert forward["delta"] == pytest.approx(-backward["delta"])
    assert forward["ci95"] == pytest.approx([-backward["ci95"][1], -backward["ci95"][0]])


def test_paired_delta_of_nothing():
    assert paired_delta([], []) == {"delta": 0.0, "ci95": [0.0, 0.0]}


@pytest.mark.parametrize(("candidate", "baseline"), [([1.0], []), ([], [1.0]), ([1, 2, 3], [1, 2])])
def test_paired_delta_refuses_mismatched_lengths(candidate, baseline):
    with pytest.raises(ValueError, match="equal lengths"):
        paired_delta(candidate, baseline)
