"""The held-out gate of a run on a mix of environments: real ``generate_tasks`` and
``heldout_gate`` stages, real evaluations on planted environments (``tests/planted_envs.py``).

The policies are ``test_gate_champion``'s steered micro models: ``silent`` answers nothing,
``chatty`` writes "aaaa…". ``planted_silence`` rewards silence, ``planted_other_any`` any answer,
``planted_other_words`` only the secret word (both fail it). Starting from ``chatty``,
``silent`` gains on planted_silence and loses every planted_other_any task, so which way each
environment goes is known in advance; the gate pairs, judges and words its reason on its own.
"""

from __future__ import annotations

import gate_policies  # tests/ is on the path: module fixtures shared by the gate tests
import pytest
from gate_policies import TOKENS

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import Checkpoint

planted = gate_policies.planted
policies = gate_policies.policies


def _mix_gate(gym_home, tmp_path, envs: dict, start: str, candidate: str, general: list[str]):
    from gymflow.lifecycle.run_context import open_run
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks

    cfg = LifecycleConfig(
        envs=envs, n_tasks=400, heldout_frac=0.2, heldout_n=64, max_new_tokens=TOKENS,
        gate={"min_n": 8, "general_envs": general, "general_n": 16},
    )  # fmt: skip
    run = open_run(gym_home, tmp_path / "runs" / f"mix-{tmp_path.name}", cfg)
    data = generate_tasks.fn(run, cfg)
    return heldout_gate.fn(run, cfg, data, Checkpoint(path=start), Checkpoint(path=candidate), None)


def test_better_on_the_mix_but_worse_on_one_environment_is_refused(
    gym_home, planted, policies, tmp_path
):
    report = _mix_gate(
        gym_home, tmp_path, {"planted_silence": 0.85, "planted_other_any": 0.15},
        policies["chatty"], policies["silent"], [],
    )  # fmt: skip
    # pooled over the mix it is a large, significant gain ...
    assert report.delta_success > 0.5 and report.cs[0] > 0
    silence, anything = report.per_env["planted_silence"], report.per_env["planted_other_any"]
    assert silence.deltas["grpo"]["delta"] == 1.0
    # ... but every planted_other_any task the start got right, it gets wrong
    assert anything.deltas["grpo"]["delta"] == -1.0
    assert anything.summaries["baseline"]["success"] == 1.0
    assert anything.summaries["grpo"]["success"] == 0.0
    assert silence.n + anything.n == report.n and anything.n >= 5
    gate = report.gate
    assert not gate.passed
    # its one failure, named in the gate's reason: the environment that regressed, shown on
    # the few planted_other_any tasks among the first batches (the gate went on while it could
    # neither show nor rule out a loss there)
    reason = gate.verdicts[0].reason
    assert reason.startswith("success on planted_other_any -1.000 (CS [-1.000, ")
    assert reason.endswith(f"n={anything.n}), significantly below the start")
    assert reason in gate.reason
    assert gate.tasks_used == report.n <= 64 and gate.rule == "sequential"


def test_a_gain_on_the_mix_with_no_environment_worse_passes(gym_home, planted, policies, tmp_path):
    """The same candidate on a mix where its other environment does not regress (both fail
    planted_other_words); the general-capability list names an environment of the mix, which is
    skipped (it is trained on), so no general set is evaluated."""
    report = _mix_gate(
        gym_home, tmp_path, {"planted_silence": 0.85, "planted_other_words": 0.15},
        policies["chatty"], policies["silent"], ["planted_other_words"],
    )  # fmt: skip
    words = report.per_env["planted_other_words"]
    assert words.deltas["grpo"]["delta"] == 0.0 and words.summaries["grpo"]["success"] == 0.0
    assert report.general == {}
    gate = report.gate
    assert gate.passed, gate.reason
    assert (
        "no environment significantly below the start (planted_silence +1.000, planted_other_words +0.000)"
        in gate.reason
    )
    # planted_other_words never moves (0 = 0 on every task): a loss there can be ruled out
    # only by the whole set, so the sequential gate used every task, as the full gate does
    assert gate.tasks_used == gate.tasks_available == report.n


@pytest.mark.parametrize("mix", [None, {"planted_silence": 1.0}])
def test_per_environment_figures_only_for_a_mix(gym_home, planted, policies, tmp_path, mix):
    """One environment (as ``env`` or as a mix of one) has nothing per environment to judge."""
    from gymflow.lifecycle.run_context import open_run
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks

    settings = {"envs": mix} if mix else {"env": "planted_silence"}
    cfg = LifecycleConfig(**settings, n_tasks=120, heldout_frac=0.2, heldout_n=16,
                          max_new_tokens=TOKENS, gate={"min_n": 8, "general_envs": []},
                          registered_model=f"test-one-env-{tmp_path.name}")  # fmt: skip
    run = open_run(gym_home, tmp_path / "runs" / f"one-{tmp_path.name}", cfg)
    data = generate_tasks.fn(run, cfg)
    report = heldout_gate.fn(
        run, cfg, data, Checkpoint(path=policies["chatty"]), Checkpoint(path=policies["silent"]),
        None,
    )  # fmt: skip
    assert report.per_env == {} and report.gate.passed
    assert "no environment significantly below" not in report.gate.reason
