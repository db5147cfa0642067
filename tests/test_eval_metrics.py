"""The evaluation's measures on hand-made rows: pass@k by the unbiased estimator (checked by
enumerating every draw of k samples), mean@K, percentiles, failure buckets, paired differences,
and the keys the lifecycle's gate reads."""

from __future__ import annotations

import itertools
import math

import pytest

from gymflow.eval.compare import paired_differences
from gymflow.eval.metrics import failure_buckets, ks_for, measure
from gymflow.eval.stats import pass_at_k, percentile


def row(task: str, success: bool, reward: float | None = None, **extra) -> dict:
    """An evaluation row as :func:`gymflow.eval.evaluation.episode_row` makes it."""
    scored = extra.pop("scored", True)
    base = {
        "env": "tool_call", "task_id": task, "sample_idx": 0, "rollout_id": f"r-{task}",
        "seed": 0, "turns": 1, "tool_calls": 0, "tool_errors": 0, "prompt_tokens": 10,
        "completion_tokens": 5, "model_tokens": 5, "usage_prompt_tokens": 0,
        "usage_completion_tokens": 0, "latency_s": 0.1, "scored": scored,
        "reward": (1.0 if success else 0.0) if reward is None and scored else reward,
        "success": success, "well_formed": True, "unsafe": False,
        "failure_kind": None if success else "wrong_tool", "failure_detail": None,
        "components": {}, "answer": "",
    }  # fmt: skip
    return base | extra


def samples(task: str, outcomes: list[bool]) -> list[dict]:
    return [row(task, ok, sample_idx=i, rollout_id=f"{task}-{i}") for i, ok in enumerate(outcomes)]


def enumerated_pass_at_k(outcomes: list[bool], k: int) -> float:
    """The definition: the share of all k-subsets of the samples holding a success."""
    draws = list(itertools.combinations(outcomes, k))
    return sum(any(d) for d in draws) / len(draws)


def test_pass_at_k_hand_computed_case():
    # Task A: 1 success in 4 samples; task B: 3 in 4.
    # A: pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 1/2, pass@4 = 1
    # B: pass@1 = 3/4, pass@2 = 1 - C(1,2)/C(4,2) = 1, pass@4 = 1
    rows = samples("A", [False, True, False, False]) + samples("B", [True, True, False, True])
    m = measure(rows)
    assert m["samples"] == 4 and m["n_tasks"] == 2 and m["n"] == 8
    assert {k: v["value"] for k, v in m["pass_at"].items()} == {"1": 0.5, "2": 0.75, "4": 1.0}
    # The naive 1 - (1 - p)^k would give task A 1 - 0.75**2 = 0.4375 at k = 2, not 0.5.
    assert 1 - (1 - 0.25) ** 2 != pass_at_k(4, 1, 2) == 0.5
    assert m["mean_at"]["4"]["value"] == 0.5  # mean over tasks of per-task mean success
    assert m["success"] == 0.5


@pytest.mark.parametrize("n", [1, 3, 6, 8])
def test_pass_at_k_equals_enumerating_every_draw(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(enumerated_pass_at_k(outcomes, k), abs=1e-12)


def test_pass_at_k_refuses_impossible_counts():
    for n, c, k in [(4, 5, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_ks_and_percentiles():
    assert ks_for(8) == [1, 2, 4, 8] and ks_for(3) == [1, 2, 3] and ks_for(1) == [1]
    values = [0.3, 0.1, 0.9, 0.5, 0.7, 0.2]
    # numpy's default ("linear") method, worked by hand on the sorted values
    # [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]: p50 at position 2.5, p95 at 4.75
    assert percentile(values, 50) == pytest.approx(0.4)
    assert percentile(values, 95) == pytest.approx(0.7 + 0.75 * 0.2)
    assert percentile([], 95) == 0.0 and percentile([2.0], 95) == 2.0


def test_rates_from_components_only_where_the_verifier_reports_them():
    rows = [
        row("a", True, components={"format": 1.0, "tool": 1.0, "args": 1.0}),
        row("b", False, 0.4, components={"format": 1.0, "tool": 1.0, "args": 0.5}),
        row("c", False, 0.2, components={"format": 1.0, "tool": 0.0, "args": 0.0}),
        row("d", False, None, scored=False, failure_kind="timeout", well_formed=False),
    ]
    m = measure(rows)
    assert m["right_tool"]["value"] == pytest.approx(2 / 3) and m["right_tool"]["n"] == 3
    assert m["arg_accuracy"]["value"] == pytest.approx(0.5)
    assert m["reward"] == pytest.approx((1.0 + 0.4 + 0.2) / 3), "the unscored row has no reward"
    assert m["scored"] == 3 and m["success"] == 0.25
    no_components = measure([row("x", True), row("y", False)])
    assert no_components["right_tool"] is None and no_components["arg_accuracy"] is None
    executed = measure([row("x", True, tool_calls=2), row("y", False, tool_calls=3, tool_errors=1)])
    assert executed["tool_execution"]["value"] == 0.5
    assert measure([row("x", True)])["tool_execution"] is None  # nothing was executed


def test_usage_and_cost():
    rows = [row("a", True, usage_prompt_tokens=1000, usage_completion_tokens=200)] * 2
    m = measure(rows, prices=(0.5, 2.0))
    assert m["usage"]["prompt_tokens"] == 2000 and m["usage"]["completion_tokens"] == 400
    assert m["usage"]["cost_usd"] == pytest.approx((2000 * 0.5 + 400 * 2.0) / 1e6)
    assert measure([row("a", True)])["usage"] is None


def test_failure_buckets_keep_two_examples_per_kind_most_frequent_first():
    rows = [row(f"w{i}", False) for i in range(3)]
    rows += [row("u", False, failure_kind="unknown_tool"), row("t", False, failure_kind="timeout")]
    rows += [row("ok", True), row("e", False, failure_kind="env_unavailable")]
    buckets = failure_buckets(rows)
    assert [b["kind"] for b in buckets][0] == "wrong_tool"
    first = buckets[0]
    assert first["count"] == 3 and first["share"] == pytest.approx(3 / 7)
    assert [e["task_id"] for e in first["examples"]] == ["w0", "w1"]
    categories = {b["kind"]: b["category"] for b in buckets}
    assert categories == {
        "wrong_tool": "wrong tool",
        "unknown_tool": "hallucinated tool",
        "timeout": "timeout",
        "env_unavailable": "env error",
    }


def test_measure_keeps_the_keys_the_gate_reads():
    m = measure([row("a", True), row("b", False)])
    for key in ("n", "success", "success_ci95", "reward", "reward_ci95", "well_formed",
                "well_formed_ci95", "unsafe_rate", "failures", "mean_completion_tokens"):  # fmt: skip
        assert key in m
    assert m["failures"] == {"none": 1, "wrong_tool": 1}


def test_paired_differences_per_task_means():
    # Policy A succeeds on tasks 0..5 of 8, B on tasks 0..1: per-task diffs 0,0,1,1,1,1,0,0.
    a = [row(f"t{i}", i < 6) for i in range(8)]
    b = [row(f"t{i}", i < 2) for i in range(8)]
    d = paired_differences(a, b)["success"]
    diffs = [0, 0, 1, 1, 1, 1, 0, 0]
    sd = math.sqrt(sum((x - 0.5) ** 2 for x in diffs) / 7)
    assert d["delta"] == 0.5 and d["n_tasks"] == 8
    assert d["ci95"] == pytest.approx(
        [0.5 - 1.959964 * sd / math.sqrt(8), 0.5 + 1.959964 * sd / math.sqrt(8)]
    )
    assert d["significant"]
    same = paired_differences(a, a)["success"]
    assert same["delta"] == 0 and not same["significant"]
