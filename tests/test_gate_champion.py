"""The ``heldout_gate`` and ``promote`` stages against the registry's champion and the gate's
guardrails: real evaluations, a real MLflow store and registry.

Two policies are made from the micro model by steering it to one token at every position:
``silent`` answers nothing (its first token is EOS: 1 token per episode), ``chatty`` writes
"aaaa…" to its token budget. Two planted environments (``tests/planted_envs.py``) make each right
or wrong: ``planted_silence`` rewards an empty answer, ``planted_any`` any non-empty one. Which
policy wins where is therefore known in advance, while the gate does its own work: evaluating
every policy on the same held-out tasks, finding and downloading the champion, pairing, judging
and registering.
"""

from __future__ import annotations

from pathlib import Path

import gate_policies  # tests/ is on the path: module fixtures shared by the gate tests
import polars as pl
from gate_policies import TOKENS

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import Checkpoint, ResolvedPolicy

planted = gate_policies.planted
policies = gate_policies.policies


def _gate(
    gym_home, tmp_path, env: str, start: str, candidate: str, general: list[str], control=None
):
    """One run's ``generate_tasks`` and ``heldout_gate`` stages."""
    from gymflow.lifecycle.run_context import open_run
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks

    cfg = LifecycleConfig(
        env=env, n_tasks=200, heldout_frac=0.2, heldout_n=32, max_new_tokens=TOKENS,
        gate={"min_n": 8, "general_envs": general, "general_n": 24, "general_measure": "success"},
    )  # fmt: skip
    run = open_run(gym_home, tmp_path / "runs" / f"{env}-{tmp_path.name}", cfg)
    data = generate_tasks.fn(run, cfg)
    control = Checkpoint(path=control) if control else None
    report = heldout_gate.fn(
        run, cfg, data, Checkpoint(path=start), Checkpoint(path=candidate), control
    )
    return run, cfg, data, report


def test_a_candidate_that_regresses_the_general_capability_set_is_refused(
    gym_home, planted, policies, tmp_path
):
    """Silence wins on planted_silence (+1.0 over a chatty start) and loses every planted_any
    task the start got right. The chatty control fails already (no gain), so it is not
    evaluated on the general set."""
    from gymflow.lifecycle.model_registry import champion_version

    assert champion_version("gymflow-planted_silence") is None, "no champion to compare with"
    _, _, _, report = _gate(
        gym_home, tmp_path, "planted_silence", policies["chatty"], policies["silent"],
        ["planted_any", "planted_silence"],  # the trained environment is skipped
        control=policies["chatty"],
    )  # fmt: skip
    assert report.delta_success == 1.0 and report.cs[0] > 0, "it does beat the start"
    assert report.general == {"planted_any": {"baseline": 1.0, "grpo": 0.0}}
    gate = report.gate
    assert not gate.passed and gate.compared_with == ["the start"]
    assert [v.passed for v in gate.verdicts] == [False, False]
    assert "general capability on planted_any: -1.000 (CS [-1.000, " in gate.reason
    assert "below the start by more than the margin 0.05" in gate.reason
    assert report.champion is None


def test_a_candidate_that_breaks_the_latency_margin_is_refused(
    gym_home, planted, policies, tmp_path
):
    """Chatty wins on planted_any (+1.0 over a silent start) but writes 16 tokens, not 1."""
    _, _, _, report = _gate(
        gym_home, tmp_path, "planted_any", policies["silent"], policies["chatty"], []
    )
    assert report.delta_success == 1.0
    assert (report.baseline["p95_tokens"], report.candidate["p95_tokens"]) == (1.0, TOKENS)
    assert not report.gate.passed
    assert "latency: p95 tokens per episode 1 → 16 (+1500 %, +15 tokens) against the start" in (
        report.gate.reason
    )


def test_a_second_run_that_does_not_beat_the_champion_is_not_promoted(
    gym_home, planted, policies, tmp_path
):
    """Run 1 promotes silence over a chatty start; run 2's candidate, the same weights, beats
    that start again but not the champion: it is registered as challenger, and says why."""
    from mlflow import MlflowClient

    from gymflow.lifecycle.model_registry import alias_version, champion_version
    from gymflow.tasks.promote import promote

    name = "gymflow-planted_silence"
    first, second = tmp_path / "first", tmp_path / "second"
    run, cfg, data, report = _gate(
        gym_home, first, "planted_silence", policies["chatty"], policies["silent"], []
    )
    assert report.gate.passed and report.champion is None
    start = ResolvedPolicy(path=policies["chatty"], source="test start", champion_version=None)
    promoted = promote.fn(run, cfg, data, start, report)
    assert promoted.champion_alias_moved and champion_version(name) == promoted.version

    run, cfg, data, report = _gate(
        gym_home, second, "planted_silence", policies["chatty"], policies["silent_again"], []
    )
    assert report.delta_success == 1.0 and report.ci95[0] > 0, "it beats the start again"
    assert report.champion is not None and report.champion.version == promoted.version
    # the champion ran on the same held-out tasks: paired row for row with the candidate
    champ_rows = pl.read_parquet(report.champion.rows)
    cand_rows = pl.read_parquet(Path(run.run_dir) / "eval" / "heldout-candidate.parquet")
    assert champ_rows["task_id"].to_list() == cand_rows["task_id"].to_list()
    assert report.champion.summary["success"] == report.candidate["success"] == 1.0
    gate = report.gate
    champion = f"champion v{promoted.version}"
    assert not gate.passed and gate.compared_with == ["the start", champion]
    assert gate.reason.startswith(f"nothing promoted: no candidate beats {champion}")
    assert f"success gain over {champion} +0.000 (CS [" in gate.reason
    assert f"n={report.n}) not significant" in gate.reason
    assert gate.tasks_used == gate.tasks_available == report.n, "a tie never settles: all tasks"
    assert gate.verdicts[0].champion_delta == 0.0

    registered_ = promote.fn(run, cfg, data, start, report)
    assert not registered_.champion_alias_moved
    assert champion_version(name) == promoted.version, "the champion stayed"
    assert alias_version(name, "challenger") == registered_.version
    version = MlflowClient().get_model_version(name, registered_.version)
    assert version.tags["gate_passed"] == "False"
    assert f"no candidate beats {champion}" in version.tags["gate_reason"]
    assert "not promoted" in version.description and champion in version.description
