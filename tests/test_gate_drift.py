"""The verifier drift sentinel: real ``generate_tasks``, ``heldout_gate``, ``promote`` and
``verifier_drift`` stages, a real MLflow store and registry, real stored episodes.

Run 1 gates and promotes ``test_gate_champion``'s silent micro model over its chatty one on
``planted_silence`` (silence is the right answer): the champion's version records the
verifier it was gated with, and the run keeps every held-out episode. Run 2, same verifier:
the sentinel has nothing to re-score. Then a planted verifier change is installed under the
same name (``tests/planted_drift.py``: version 2 also rewards answers starting with "a"): run 3's
sentinel re-scores the champion run's stored episodes, finds every one of the chatty start's
"aaaa…" verdicts flipped, and stops the run with ``verifier_drift`` naming the tasks, after
writing the report that lists the flips.
"""

from __future__ import annotations

import gate_policies  # tests/ is on the path: module fixtures shared by the gate tests
import pytest
from gate_policies import TOKENS
from planted_drift import changed
from planted_envs import registered

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import Checkpoint, ResolvedPolicy

policies = gate_policies.policies


def _run(gym_home, tmp_path, name: str):
    from gymflow.lifecycle.run_context import open_run
    from gymflow.tasks.generate import generate_tasks

    cfg = LifecycleConfig(
        env="planted_silence", registered_model="gymflow-drift-test", n_tasks=200,
        heldout_frac=0.2, heldout_n=32, max_new_tokens=TOKENS,
        gate={"min_n": 8, "general_envs": []},
    )  # fmt: skip
    run = open_run(gym_home, tmp_path / "runs" / name, cfg)
    return run, cfg, generate_tasks.fn(run, cfg)


def test_the_sentinel_passes_an_unchanged_verifier_and_stops_a_changed_one(
    gym_home, policies, tmp_path
):
    import polars as pl

    from gymflow.lifecycle.model_registry import champion_version
    from gymflow.rollout.store import read_rollouts
    from gymflow.tasks.drift import verifier_drift
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.promote import promote

    with registered(tmp_path / "planted"):
        run, cfg, data = _run(gym_home, tmp_path, "gated")
        first = verifier_drift.fn(run, cfg, data)
        assert first.checked.startswith("no champion") and first.episodes == 0
        chatty, silent = Checkpoint(path=policies["chatty"]), Checkpoint(path=policies["silent"])
        report = heldout_gate.fn(run, cfg, data, chatty, silent, None)
        start = ResolvedPolicy(path=chatty.path, source="test start", champion_version=None)
        promoted = promote.fn(run, cfg, data, start, report)
        assert promoted.champion_alias_moved and champion_version(cfg.model_name) == "1"

        run, cfg, data = _run(gym_home, tmp_path, "unchanged")
        same = verifier_drift.fn(run, cfg, data)
        assert same.checked.startswith("unchanged") and same.episodes == 0

    stored = read_rollouts(tmp_path / "runs" / "gated" / "eval" / "heldout-baseline")
    chatty_tasks = sorted(stored["task_id"].to_list())
    assert not stored["success"].any(), "v1 refused every 'aaaa' answer"
    with changed(tmp_path / "drift"):
        run, cfg, data = _run(gym_home, tmp_path, "changed")
        with pytest.raises(GymflowError) as stopped:
            verifier_drift.fn(run, cfg, data)
    error = stopped.value
    assert error.kind == FailureKind.VERIFIER_DRIFT
    episodes = 2 * len(chatty_tasks)  # the start's and the champion's own, both stored
    assert (
        f"{len(chatty_tasks)} of {episodes} stored held-out verdicts of gymflow-drift-test v1"
        in (error.detail)
    )
    assert "planted_silence version 1 → 2" in error.detail
    assert f"tasks {', '.join(chatty_tasks[:10])}" in error.detail
    # the report, written before the stage raised, shows every flip: the chatty start's
    # episodes now pass; the champion's own (silent) verdicts did not move
    flips = (tmp_path / "runs" / "changed" / "reports" / "verifier_drift.md").read_text()
    lines = {line.split(" | ")[0].strip("| "): line for line in flips.splitlines() if "|" in line}
    for task_id in chatty_tasks:  # chatty ran out of tokens: refused then, silence enough now
        assert lines[task_id].endswith("| heldout-baseline | truncated (0) | success (1) |")
    assert "heldout-candidate" not in flips
    rows = pl.read_parquet(tmp_path / "runs" / "gated" / "eval" / "heldout-candidate.parquet")
    assert rows["success"].all()
