"""The verdict per environment (is RL worth it here?) on synthetic held-out evaluations, and the
gate's choice among three arms.

Per-task successes are built with a chosen number of tasks where GRPO wins and where the control
wins (the rest agree), shuffled; the paired differences and their confidence sequences are the
gate's own (:func:`gymflow.eval.evidence.paired` at the per-candidate level of three
candidates), so each verdict below is what a run with those held-out outcomes would report.
"""

from __future__ import annotations

import random

import pytest

from gymflow.eval.evaluation import summarize
from gymflow.eval.evidence import paired
from gymflow.eval.gate import Candidate, GateSettings, choice_settled, choose, latency_figures
from gymflow.eval.verdict import DEFAULT_MARGIN, grpo_versus_controls, rl_verdict

ALPHA = GateSettings().candidate_alpha(3)


def pair(n: int, grpo_wins: int, control_wins: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """(GRPO, control) per-task success: ``grpo_wins`` tasks only GRPO solves, ``control_wins``
    only the control, half of the rest both."""
    rest = n - grpo_wins - control_wins
    rows = [(1, 0)] * grpo_wins + [(0, 1)] * control_wins + [(1, 1)] * (rest // 2)
    rows += [(0, 0)] * (n - len(rows))
    random.Random(seed).shuffle(rows)
    return [a for a, _ in rows], [b for _, b in rows]


def diff(n: int, grpo_wins: int, control_wins: int, seed: int = 0):
    return paired(*pair(n, grpo_wins, control_wins, seed), ALPHA)


def test_rl_pays_when_grpo_is_shown_above_every_control():
    v = rl_verdict({"sft_control": diff(400, 120, 10), "rft_control": diff(400, 100, 15, 1)})
    assert v.verdict == "rl_pays"
    assert v.decided_by == ["sft_control", "rft_control"]
    assert all(e.grpo_above and e.cs[0] > 0 for e in v.evidence)
    assert v.sentence.startswith("RL pays here") and "rft_control" in v.sentence


def test_above_one_control_only_is_not_rl_pays():
    """GRPO far above the SFT control but level with RFT: the cheaper RFT arm did as well."""
    v = rl_verdict({"sft_control": diff(2000, 600, 20), "rft_control": diff(2000, 10, 10, 1)})
    assert v.evidence[0].grpo_above and not v.evidence[1].grpo_above
    assert v.verdict == "cheaper_suffices"
    assert v.decided_by == ["rft_control"]
    assert "rft_control is shown not worse than GRPO by more than 5 points" in v.sentence


def test_cheaper_suffices_names_the_cheapest_control_within_the_margin():
    v = rl_verdict({"sft_control": diff(2000, 15, 15), "rft_control": diff(2000, 10, 10, 1)})
    assert v.verdict == "cheaper_suffices"
    assert v.decided_by == ["sft_control"]  # the first listed: the cheapest
    assert v.evidence[0].cs[1] < DEFAULT_MARGIN


def test_a_control_significantly_better_than_grpo_suffices():
    v = rl_verdict({"sft_control": diff(400, 5, 120)})
    assert v.evidence[0].cs[1] < 0 and v.verdict == "cheaper_suffices"


def test_non_inferiority_at_the_margins_edge():
    """The same evidence on either side of its upper bound: a margin just above it decides
    ``cheaper_suffices``, one just below it leaves the run undecided (GRPO not shown above)."""
    d = diff(1500, 60, 30)
    lo, hi = d.cs
    assert lo < 0 < hi < 0.1, d.cs  # not shown above, upper bound somewhere under 10 points
    assert rl_verdict({"sft_control": d}, margin=hi + 1e-9).verdict == "cheaper_suffices"
    assert rl_verdict({"sft_control": d}, margin=hi).verdict == "undecided"  # strictly under
    assert rl_verdict({"sft_control": d}, margin=hi - 1e-3).verdict == "undecided"


def test_too_few_tasks_cannot_decide():
    """GRPO 6 points ahead on 60 tasks: the interval spans both a loss and a gain well beyond
    the margin, so neither verdict is shown."""
    v = rl_verdict({"sft_control": diff(60, 6, 2), "rft_control": diff(60, 4, 3, 1)})
    assert v.verdict == "undecided"
    assert all(e.cs[0] < 0 and e.cs[1] > DEFAULT_MARGIN for e in v.evidence)
    assert v.sentence.startswith("Undecided") and "n=60" in v.sentence


def test_two_equal_arms_on_a_few_hundred_tasks_stay_undecided_at_five_points():
    """Equivalence within five points needs many tasks: equal arms that disagree on a fifth of
    400 tasks are not shown within the default margin (the module docstring's claim)."""
    v = rl_verdict({"sft_control": diff(400, 40, 40)})
    assert v.verdict == "undecided" and v.evidence[0].cs[1] > DEFAULT_MARGIN


def test_the_margin_setting_is_checked():
    assert GateSettings().verdict_margin == DEFAULT_MARGIN
    with pytest.raises(ValueError):
        GateSettings(verdict_margin=0.0)
    with pytest.raises(ValueError):
        rl_verdict({})


def test_grpo_versus_controls_pairs_the_tasks_both_were_evaluated_on():
    grpo, sft = pair(300, 80, 10)
    rft = sft[:200]  # a sequential gate stopped this arm earlier
    out = grpo_versus_controls({"grpo": grpo, "sft_control": sft, "rft_control": rft},
                               ["sft_control", "rft_control"], ALPHA)  # fmt: skip
    assert out["sft_control"].n == 300 and out["rft_control"].n == 200
    assert out["rft_control"] == paired(grpo[:200], rft, ALPHA)


# the gate's choice among three arms


def _rows(success: list[int]) -> list[dict]:
    return [
        {"task_id": f"t{i}", "success": s, "well_formed": True, "unsafe": False,
         "reward": float(s), "failure_kind": None if s else "wrong_answer",
         "completion_tokens": 12, "latency_s": 0.05}
        for i, s in enumerate(success)
    ]  # fmt: skip


def _summary(success: list[int]) -> dict:
    rows = _rows(success)
    return summarize(rows) | latency_figures([12] * len(rows), [0.05] * len(rows))


def _three_arms(start, arms: dict[str, list[int]]):
    cands = [
        Candidate(name=name, summary=_summary(s), delta=paired(s, start, ALPHA))
        for name, s in arms.items()
    ]
    between = {
        (a, b): paired(arms[a], arms[b], ALPHA)
        for a, b in [("grpo", "sft_control"), ("grpo", "rft_control"), ("rft_control", "sft_control")]
    }  # fmt: skip
    return _summary(start), cands, between


def _successes(n: int, rate: float, seed: int) -> list[int]:
    wins = round(rate * n)
    out = [1] * wins + [0] * (n - wins)
    random.Random(seed).shuffle(out)
    return out


def test_the_gate_promotes_the_cheapest_arm_no_other_is_shown_above():
    """All three beat the start; RFT is shown above the SFT control, GRPO is not shown above
    RFT: RFT, the cheapest arm nothing beats, is promoted, and the reason names every pair."""
    n = 400
    start = _successes(n, 0.2, 0)
    sft = [max(s, x) for s, x in zip(start, _successes(n, 0.3, 1), strict=True)]
    rft = [max(s, x) for s, x in zip(sft, _successes(n, 0.5, 2), strict=True)]
    grpo = list(rft)
    base, cands, between = _three_arms(
        start, {"sft_control": sft, "rft_control": rft, "grpo": grpo}
    )
    assert (
        between[("rft_control", "sft_control")].above and not between[("grpo", "rft_control")].above
    )
    result = choose(base, cands, GateSettings(), between[("grpo", "sft_control")], between=between)
    assert result.passed and result.chosen == "rft_control"
    assert "grpo − rft_control" in result.reason and "rft_control − sft_control" in result.reason
    assert "rft_control is the cheapest passing arm no other is shown above" in result.reason
    assert set(result.between) == {
        "grpo − sft_control",
        "grpo − rft_control",
        "rft_control − sft_control",
    }
    assert choice_settled(result, between[("grpo", "sft_control")], between) is False


def test_the_gate_promotes_grpo_only_when_shown_above_both_controls():
    n = 400
    start = _successes(n, 0.2, 0)
    sft = [max(s, x) for s, x in zip(start, _successes(n, 0.2, 1), strict=True)]
    rft = list(sft)
    grpo = [max(s, x) for s, x in zip(sft, _successes(n, 0.5, 2), strict=True)]
    base, cands, between = _three_arms(
        start, {"sft_control": sft, "rft_control": rft, "grpo": grpo}
    )
    result = choose(base, cands, GateSettings(), between=between)
    assert result.chosen == "grpo", result.reason
    # settle_choice asks for every pair of passing arms: two equal controls never settle theirs
    assert not choice_settled(result, None, between)
    assert choice_settled(result, None, {p: d for p, d in between.items() if p[0] == "grpo"})


def test_two_arms_choose_as_before_without_between():
    """No ``between``: the two-candidate rule and reason are unchanged."""
    n = 400
    start = _successes(n, 0.2, 0)
    sft = [max(s, x) for s, x in zip(start, _successes(n, 0.4, 1), strict=True)]
    grpo = list(sft)
    cands = [
        Candidate(name="grpo", summary=_summary(grpo), delta=paired(grpo, start, ALPHA)),
        Candidate(name="sft_control", summary=_summary(sft), delta=paired(sft, start, ALPHA)),
    ]
    result = choose(_summary(start), cands, GateSettings(), paired(grpo, sft, ALPHA))
    assert result.chosen == "sft_control" and result.between == {}
    assert "GRPO not shown above its control, so the control" in result.reason
    assert "cheapest passing arm" not in result.reason
