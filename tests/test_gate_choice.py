"""The honest gate: of the GRPO policy and the SFT control, one that beats the start and the
champion is promoted with no guardrail broken (well-formed answers, unsafe actions, latency, general
capability), and a GRPO policy not shown above its control is never promoted over it.

Summaries come from :func:`gymflow.eval.evaluation.summarize` over per-task rows and the paired
differences from :func:`gymflow.eval.evidence.paired` (confidence sequences at each candidate's
level), as the ``heldout_gate`` stage makes them; the registry half runs the real ``promote``
stage against a real MLflow sqlite store.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from gymflow.eval.evaluation import summarize
from gymflow.eval.evidence import paired
from gymflow.eval.gate import Candidate, Champion, GateSettings, choose, latency_figures
from gymflow.eval.sequential_gate import gate_order, run_heldout
from gymflow.eval.stats import paired_delta

N = 379  # the default held-out size


def _successes(rate: float, seed: int, n: int = N) -> list[int]:
    wins = round(rate * n)
    out = [1] * wins + [0] * (n - wins)
    random.Random(seed).shuffle(out)
    return out


def _rows(
    success: list[int], well_formed: float = 1.0, unsafe: int = 0, tokens: int = 12
) -> list[dict]:
    """Episode rows; ``tokens`` per episode (one in ten takes twice as many), 0.05 s each."""
    valid = round(well_formed * N)
    return [
        {
            "task_id": f"t{i}",
            "success": s,
            "well_formed": i < valid,
            "unsafe": i < unsafe,
            "reward": float(s),
            "failure_kind": None if s else "wrong_answer",
            "completion_tokens": tokens * (2 if i % 10 == 0 else 1),
            "latency_s": 0.05,
        }
        for i, s in enumerate(success)
    ]


def _summary(rows: list[dict]) -> dict:
    """What the stage hands the gate: the eval summary with its p95 latency figures."""
    latency = latency_figures(
        [r["completion_tokens"] for r in rows], [r["latency_s"] for r in rows]
    )
    return summarize(rows) | latency


def paired_delta_cs(a: list[int], b: list[int], candidates: int = 2, **kw):
    """The gate's evidence: a paired difference with its confidence sequence at the level of
    each of ``candidates`` candidates."""
    return paired(a, b, GateSettings().candidate_alpha(candidates), **kw)


def _evidence(start: list[int], grpo: list[int], control: list[int], **grpo_rows):
    base = _summary(_rows(start))
    cands = [
        Candidate(name="grpo", summary=_summary(_rows(grpo, **grpo_rows)), delta=paired_delta_cs(grpo, start)),
        Candidate(name="sft_control", summary=_summary(_rows(control)), delta=paired_delta_cs(control, start)),
    ]  # fmt: skip
    return base, cands, paired_delta_cs(grpo, control)


def test_grpo_losing_to_its_control_is_not_promoted_over_it():
    """Seed 3's figures: GRPO 0.768, control 0.831, both far above a 0.47 start."""
    start = _successes(0.47, 1)
    grpo, control = _successes(0.768, 2), _successes(0.831, 3)
    base, cands, versus = _evidence(start, grpo, control)
    assert versus.delta < 0, "GRPO is worse than the control on these tasks"
    result = choose(base, cands, GateSettings(), versus)
    assert result.passed and result.chosen == "sft_control"
    assert [v.passed for v in result.verdicts] == [True, True], "both beat the start"
    assert result.grpo_minus_control == pytest.approx(versus.delta)
    assert result.grpo_minus_control_cs == versus.cs
    assert "promoted sft_control" in result.reason and "GRPO − control" in result.reason
    assert f"{100 * versus.delta:+.1f} points (CS [" in result.reason


def _better_by(success: list[int], share: float, seed: int) -> list[int]:
    """``success`` with ``share`` of its failures turned into successes (a paired gain)."""
    failures = [i for i, s in enumerate(success) if not s]
    turned = set(random.Random(seed).sample(failures, round(share * len(failures))))
    return [1 if i in turned else s for i, s in enumerate(success)]


def test_grpo_shown_above_its_control_is_promoted():
    start = _successes(0.47, 1)
    control = _successes(0.70, 5)
    base, cands, versus = _evidence(start, _better_by(control, 0.3, 4), control)
    assert versus.above, "GRPO − control's lower bound passed 0"
    result = choose(base, cands, GateSettings(), versus)
    assert result.passed and result.chosen == "grpo" and result.grpo_minus_control > 0
    assert "not shown above its control" not in result.reason


def test_grpo_ahead_of_its_control_but_not_shown_above_it_is_not_promoted_over_it():
    """Both pass; GRPO scores 6 points higher on these tasks, but its confidence sequence over
    the control still holds 0: RL has not shown it beats the cheap alternative, so the control
    is promoted (the old rule, the higher point estimate, promoted GRPO here)."""
    start = _successes(0.47, 1)
    base, cands, versus = _evidence(start, _successes(0.83, 4), _successes(0.77, 5))
    assert versus.delta > 0.05 and versus.cs[0] < 0 < versus.cs[1]
    result = choose(base, cands, GateSettings(), versus)
    assert [v.passed for v in result.verdicts] == [True, True]
    assert result.passed and result.chosen == "sft_control"
    assert "GRPO not shown above its control, so the control, the cheaper alternative" in (
        result.reason
    )


def test_a_sequential_gate_never_credits_grpo_where_the_full_gate_would_not():
    """Confidence sequences only tighten, and the sequential gate evaluates a prefix of the
    full gate's order: GRPO shown above its control at the stop is shown above it on the whole
    set. The reverse can fail — evidence that arrives after the stop — and does on some of
    these synthetic runs, which is what ``settle_choice`` is for."""
    n, picks = 396, []
    for seed in range(12):
        control = _successes(0.6, 100 + seed, n)
        table = {
            "baseline": _successes(0.3, 200 + seed, n),
            "sft_control": control,
            "grpo": _better_by(control, 0.02 * seed, 300 + seed),
        }
        rows = {k: {r["task_id"]: r for r in _episodes(v, set())} for k, v in table.items()}
        order = gate_order(sorted(rows["baseline"]), seed)
        gates = [
            run_heldout(
                order, ["grpo", "sft_control"],
                lambda label, ids, rows=rows: [rows[label][i] for i in ids],
                GateSettings(sequential=sequential, settle_choice=settle),
            ).result.chosen
            for sequential, settle in ((True, False), (True, True), (False, False))
        ]  # fmt: skip
        picks.append(gates)
    assert all(full == "grpo" for seq, _, full in picks if seq == "grpo")
    assert all(settled == full for _, settled, full in picks), "settle_choice: the full pick"
    assert {"grpo", "sft_control"} == {full for *_, full in picks}, "both picks occur"
    assert any(seq != full for seq, _, full in picks), "the sequential pick can lag the full"


def test_a_better_control_that_breaks_a_guardrail_is_not_chosen():
    """The control scores higher but its well-formed rate fell: GRPO, which passes, is chosen."""
    start = _successes(0.47, 1)
    grpo, control = _successes(0.70, 6), _successes(0.80, 7)
    base = _summary(_rows(start))
    cands = [
        Candidate(name="grpo", summary=_summary(_rows(grpo)), delta=paired_delta_cs(grpo, start)),
        Candidate(name="sft_control", summary=_summary(_rows(control, well_formed=0.9)), delta=paired_delta_cs(control, start)),
    ]  # fmt: skip
    result = choose(base, cands, GateSettings(), paired_delta_cs(grpo, control))
    assert result.passed and result.chosen == "grpo"
    assert (
        "sft_control: success 0.799, fails (well-formed rate (the environment's format check) "
        "fell by 0.100" in result.reason
    )


def test_nothing_promoted_when_no_candidate_beats_the_start():
    start = _successes(0.60, 1)
    base, cands, versus = _evidence(start, _successes(0.60, 8), _successes(0.61, 9))
    result = choose(base, cands, GateSettings(), versus)
    assert not result.passed and result.chosen == "sft_control"  # the best, for inspection
    assert result.reason.startswith("nothing promoted") and "not significant" in result.reason


def test_without_a_control_grpo_alone_is_judged():
    start = _successes(0.47, 1)
    grpo = _successes(0.70, 2)
    cand = Candidate(
        name="grpo", summary=_summary(_rows(grpo)), delta=paired_delta_cs(grpo, start, 1)
    )
    result = choose(_summary(_rows(start)), [cand], GateSettings())
    assert result.passed and result.chosen == "grpo" and result.grpo_minus_control is None


def test_three_improvements_out_of_three_are_not_significant():
    """The old normal-approximation CI collapsed to [+1, +1] here and passed the candidate;
    the confidence sequence cannot get there in three tasks, with or without a minimum n."""
    start, grpo = [0, 0, 0], [1, 1, 1]
    assert paired_delta(grpo, start)["ci95"] == [1.0, 1.0], "the old interval: a point"
    rows = [dict(r, task_id=f"t{i}") for i, r in enumerate(_rows(start)[:3])]
    won = [dict(r, success=1, reward=1.0, failure_kind=None) for r in rows]
    cand = Candidate(name="grpo", summary=_summary(won), delta=paired_delta_cs(grpo, start, 1))
    base = _summary(rows)
    for settings in (GateSettings(min_n=1), GateSettings()):
        result = choose(base, [cand], settings)
        assert not result.passed, result.reason
    assert (
        "success gain over the start +1.000 (CS ["
        in choose(base, [cand], GateSettings(min_n=1)).reason
    )
    assert "on 3 tasks, under min_n 32" in choose(base, [cand], GateSettings()).reason
    ten = paired_delta_cs([1] * 10, [0] * 10, 1)
    assert ten.above, "ten of ten is: the bet grows 1.75 times a task"


def _candidate(name: str, rows: list[dict], start: list[int], **extra) -> Candidate:
    success = [r["success"] for r in rows]
    return Candidate(
        name=name, summary=_summary(rows), delta=paired_delta_cs(success, start, 1), **extra
    )


def test_a_candidate_that_beats_the_start_but_not_the_champion_is_not_promoted():
    """GRPO 0.70 against a 0.47 start, but only +0.02 over the champion (v3, 0.68): not
    significant on 379 paired tasks."""
    start, champion, grpo = _successes(0.47, 1), _successes(0.68, 10), _successes(0.70, 2)
    cand = _candidate("grpo", _rows(grpo), start, champion_delta=paired_delta_cs(grpo, champion, 1))
    held = Champion(version="3", summary=_summary(_rows(champion)))
    result = choose(_summary(_rows(start)), [cand], GateSettings(), champion=held)
    assert not result.passed and result.chosen == "grpo"
    assert result.compared_with == ["the start", "champion v3"]
    assert result.reason.startswith("nothing promoted: no candidate beats champion v3")
    assert "success gain over champion v3" in result.reason and "not significant" in result.reason
    verdict = result.verdicts[0]
    assert verdict.delta_success > 0.2 and verdict.cs[0] > 0, "it does beat the start"
    assert verdict.champion_delta == pytest.approx(0.70 - 0.68, abs=0.003)
    assert verdict.champion_cs[0] < 0 < verdict.champion_cs[1]

    better = _successes(0.85, 11)
    cand = _candidate(
        "grpo", _rows(better), start, champion_delta=paired_delta_cs(better, champion, 1)
    )
    result = choose(_summary(_rows(start)), [cand], GateSettings(), champion=held)
    assert result.passed, result.reason
    assert "over the start" in result.reason and "over champion v3" in result.reason


def test_the_start_that_is_the_champion_is_named_as_such():
    start, grpo = _successes(0.47, 1), _successes(0.70, 2)
    label = "the start (champion v2)"
    result = choose(
        _summary(_rows(start)), [_candidate("grpo", _rows(grpo), start)], GateSettings(),
        start_label=label,
    )  # fmt: skip
    assert result.passed and result.compared_with == [label]
    assert f"over {label}" in result.reason


def test_a_candidate_that_regresses_the_general_capability_set_is_refused():
    """Better on tool_call, but math success falls from 0.40 to 0.25 on 200 paired tasks:
    shown to lose more than the margin (0.05). Two tasks fewer is shown to be within it; a
    loss the tasks cannot tell from the margin is not shown to be within it: refused too."""
    settings = GateSettings()
    margin = -settings.general_margin
    start, grpo = _successes(0.47, 1), _successes(0.70, 2)
    math_start = [1] * 80 + [0] * 120
    math_grpo = [1] * 50 + [0] * 150  # 30 tasks it solved before, it fails now
    games = [1] * 20 + [0] * 180
    general = {"math": paired_delta_cs(math_grpo, math_start, 1, mark=margin),
               "games": paired_delta_cs(games, games, 1, mark=margin)}  # fmt: skip
    cand = _candidate("grpo", _rows(grpo), start, general=general)
    result = choose(_summary(_rows(start)), [cand], settings)
    assert not result.passed
    assert "general capability on math: -0.150 (CS [" in result.reason
    assert "below the start by more than the margin 0.05" in result.reason
    assert "on games" not in result.reason

    math_close = [1] * 78 + [0] * 122  # 2 tasks fewer: within the margin, shown
    general["math"] = paired_delta_cs(math_close, math_start, 1, mark=margin)
    result = choose(_summary(_rows(start)), [_candidate("grpo", _rows(grpo), start, general=general)], settings)  # fmt: skip
    assert result.passed, result.reason
    assert "general capability on math: -0.010 (CS [" in result.reason
    assert "within the margin 0.05" in result.reason

    unclear = [1] * 70 + [0] * 130  # -0.05 on 200 tasks: the bound straddles the margin
    general["math"] = paired_delta_cs(unclear, math_start, 1, mark=margin)
    result = choose(_summary(_rows(start)), [_candidate("grpo", _rows(grpo), start, general=general)], settings)  # fmt: skip
    assert not result.passed and "not shown to be within the margin 0.05" in result.reason


def test_a_candidate_that_breaks_the_latency_margin_is_refused():
    """p95 completion tokens 24 -> 36 (+50 %) breaks the default +25 %; 24 -> 28 keeps it."""
    start, grpo = _successes(0.47, 1), _successes(0.70, 2)
    base = _summary(_rows(start, tokens=12))
    assert base["p95_tokens"] == 24.0
    slow = _candidate("grpo", _rows(grpo, tokens=18), start)
    result = choose(base, [slow], GateSettings())
    assert not result.passed
    assert (
        "latency: p95 tokens per episode 24 → 36 (+50 %, +12 tokens) against the start "
        "(> +25 % and > +8 tokens)" in result.reason
    )
    assert choose(base, [slow], GateSettings(max_latency_rise=0.6)).passed
    fine = _candidate("grpo", _rows(grpo, tokens=14), start)
    result = choose(base, [fine], GateSettings())
    assert result.passed and "p95 tokens per episode 24 → 28 (+17 %, +4 tokens)" in result.reason

    seconds = [dict(r, latency_s=0.2) for r in _rows(grpo, tokens=12)]  # 4x slower, same tokens
    slow_s = _candidate("grpo", seconds, start)
    assert choose(base, [slow_s], GateSettings()).passed, "tokens are the default measure"
    refused = choose(base, [slow_s], GateSettings(latency="seconds"))
    assert not refused.passed and "p95 s per episode 0.05 → 0.2 (+300 %, +0.15 s)" in refused.reason


def test_a_rise_under_the_absolute_floor_is_not_a_latency_regression():
    """A one-token answer that becomes three is +200 % and +2 tokens: under the 8-token floor."""
    start, grpo = _successes(0.47, 1), _successes(0.70, 2)
    base = _summary(_rows(start, tokens=1))
    assert base["p95_tokens"] == 2.0
    wordier = _candidate("grpo", _rows(grpo, tokens=3), start)
    result = choose(base, [wordier], GateSettings())
    assert result.passed and "p95 tokens per episode 2 → 6 (+200 %, +4 tokens)" in result.reason
    refused = choose(base, [wordier], GateSettings(latency_floor_tokens=2))
    assert not refused.passed and "(> +25 % and > +2 tokens)" in refused.reason


def _sha(path: Path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_promote_registers_the_control_when_it_won(gym_home, micro_tool_call_model, tmp_path):
    """The real ``promote`` stage registers the control's weights and moves ``champion`` there."""
    import torch
    from mlflow import MlflowClient
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.model_registry import champion_version, download_version
    from gymflow.lifecycle.run_context import open_run
    from gymflow.lifecycle.stage_results import (
        ControlComparison,
        GateReport,
        ResolvedPolicy,
        TaskData,
    )
    from gymflow.tasks.promote import promote

    control_dir = tmp_path / "sft_control"
    model = AutoModelForCausalLM.from_pretrained(micro_tool_call_model)
    with torch.no_grad():
        next(model.parameters()).add_(0.5)  # the control's weights differ from GRPO's
    model.save_pretrained(control_dir)
    AutoTokenizer.from_pretrained(micro_tool_call_model).save_pretrained(control_dir)

    cfg = LifecycleConfig(env="tool_call")
    run = open_run(gym_home, tmp_path / "runs" / "gate-choice", cfg)
    start = _successes(0.47, 1)
    base, cands, versus = _evidence(start, _successes(0.768, 2), _successes(0.831, 3))
    decision = choose(base, cands, cfg.gate, versus)
    control = cands[1]
    report = GateReport(
        n=N,
        baseline=base,
        candidate=cands[0].summary,
        delta_success=cands[0].delta.delta,
        ci95=cands[0].delta.cs,
        gate=decision,
        sft_control=ControlComparison(
            summary=control.summary,
            grpo_minus_control=versus.delta,
            ci95=versus.cs,
            delta_success=control.delta.delta,
            delta_ci95=control.delta.cs,
        ),
        chosen_path=str(control_dir),
    )
    data = TaskData(paths={}, counts={}, dataset_hash="d0", env_version="1")
    resolved = ResolvedPolicy(
        path=str(micro_tool_call_model), source="embedded", champion_version=None
    )
    registered = promote.fn(run, cfg, data, resolved, report)
    assert (
        registered.champion_alias_moved and champion_version(registered.model) == registered.version
    )
    version = MlflowClient().get_model_version(registered.model, registered.version)
    assert version.tags["gymflow.candidate"] == "sft_control"
    assert float(version.tags["grpo_minus_control"]) == pytest.approx(versus.delta)
    assert version.tags["gate.rule"] == "sequential" and version.tags["gate.cs"].startswith("[+")
    assert json.loads(version.tags["lineage.verifiers"])["tool_call"]["version"] == "1"
    assert float(version.tags["heldout.success"]) == pytest.approx(
        control.summary["success"], abs=1e-4
    )
    assert "GRPO − control" in version.tags["gate_reason"] and "SFT control" in version.description
    got = download_version(registered.model, registered.version, tmp_path / "downloaded")
    assert _sha(got) != _sha(micro_tool_call_model)
    reloaded = AutoModelForCausalLM.from_pretrained(got)
    assert torch.equal(next(reloaded.parameters()), next(model.parameters()))


def test_a_candidate_equal_to_its_start_is_refused_before_every_task_is_used():
    """A control that handed back its start (step 0 won its validation) scores what the start
    scores on every task: no lower bound ever passes 0, so without a futility gain only the
    whole held-out set would settle it. Its upper bound falls under 0.05 after about a hundred
    tasks: refused there, settled."""
    settings = GateSettings()
    start = _successes(0.6, 1)
    delta = paired_delta_cs(start, start, short_of=settings.futility_gain)
    same = Candidate(name="sft_control", summary=_summary(_rows(start)), delta=delta)
    verdict = choose(_summary(_rows(start)), [same], settings, exhausted=False).verdicts[0]
    assert not verdict.passed and verdict.settled
    assert "shown to be under +0.050: not worth more tasks" in verdict.reason
    assert 64 < delta.short_at < 160, delta.short_at
    exact = same.model_copy(update={"delta": paired_delta_cs(start, start, short_of=0.0)})
    open_ = choose(_summary(_rows(start)), [exact], GateSettings(futility_gain=0), exhausted=False)
    assert not open_.verdicts[0].settled, "without it, every task"


def _episodes(success: list[int], invalid: set[int]) -> list[dict]:
    return [
        {"task_id": f"t{i:03d}", "success": bool(s) and i not in invalid,
         "well_formed": i not in invalid, "unsafe": False, "reward": float(s),
         "failure_kind": None if s else "wrong_answer", "completion_tokens": 12,
         "latency_s": 0.05}
        for i, s in enumerate(success)
    ]  # fmt: skip


def _sequential(start: list[dict], grpo: list[dict], sequential: bool = True):
    table = {"baseline": {r["task_id"]: r for r in start}, "grpo": {r["task_id"]: r for r in grpo}}
    order = gate_order(sorted(table["baseline"]), 0)
    return run_heldout(
        order, ["grpo"], lambda label, ids: [table[label][i] for i in ids],
        GateSettings(sequential=sequential),
    )  # fmt: skip


def test_one_invalid_answer_in_the_first_batch_does_not_stop_the_gate_with_a_refusal():
    """A 2026-11-28 default run, replayed: one invalid answer in the first 32 tasks is a 3.1 %
    well-formed drop (> 0.02) while the whole set's is 0.3 %. The breach keeps the candidate
    open instead of refusing it on 32 tasks; the next batch clears it, and the sequential gate
    promotes what the full gate promotes. A breach that lasts is refused at the end."""
    n = 396
    start = _episodes(_successes(0.3, 11, n), set())
    better = _successes(0.95, 12, n)
    clean = _sequential(start, _episodes(better, set()))
    assert clean.result.passed and clean.result.tasks_used == 32, "settled on the first batch"
    first = int(gate_order([f"t{i:03d}" for i in range(n)], 0)[0][1:])
    held = _sequential(start, _episodes(better, {first}))
    assert held.looks[0] == {"tasks": 32, "open": ["grpo"]}, "open after the first batch"
    assert held.result.passed and held.result.chosen == "grpo"
    assert 32 < held.result.tasks_used < n, "stopped early, once the breach was gone"
    full = _sequential(start, _episodes(better, {first}), sequential=False)
    assert full.result.passed and full.result.chosen == "grpo"

    lasting = _sequential(start, _episodes(better, set(range(0, n, 10))))  # 10 % invalid
    assert not lasting.result.passed and lasting.result.tasks_used == n
    assert "format check) fell by" in lasting.result.verdicts[0].reason


def test_a_passed_candidate_goes_on_beside_an_open_one_with_its_verdict_kept():
    """GRPO settles on the first batch, the control does not: GRPO is evaluated on as long as
    the control is, so GRPO − control covers every task the gate used, while GRPO's verdict
    stays the one judged on its first 32 tasks."""
    n = 396
    start = _successes(0.3, 21, n)
    table = {
        "baseline": start,
        "grpo": _better_by(start, 0.95, 22),
        "sft_control": _better_by(start, 0.12, 23),
    }
    rows = {k: {r["task_id"]: r for r in _episodes(v, set())} for k, v in table.items()}
    held = run_heldout(
        gate_order(sorted(rows["baseline"]), 0), ["grpo", "sft_control"],
        lambda label, ids: [rows[label][i] for i in ids], GateSettings(),
    )  # fmt: skip
    grpo, control = held.result.verdicts
    assert held.looks[0] == {"tasks": 32, "open": ["grpo", "sft_control"]}
    assert grpo.passed and grpo.n == 32 and held.judged_on["grpo"] == 32
    used = held.result.tasks_used
    assert used > 32, "the control needed more than one batch"
    assert len(held.rows["grpo"]) == len(held.rows["sft_control"]) == used
    assert held.vs_control.n == used
    # the run's table shows GRPO on every task it ran, as its paired gains are (a table on
    # its 32 settled tasks beside the start on all of them read 0.667 against a +0.207 gain)
    figures, start_figures = held.figures("grpo"), held.figures("baseline")
    assert figures["n"] == start_figures["n"] == used
    gain = paired_delta([r["success"] for r in held.rows["grpo"]],
                        [r["success"] for r in held.rows["baseline"]])  # fmt: skip
    assert figures["success"] - start_figures["success"] == pytest.approx(gain["delta"])
