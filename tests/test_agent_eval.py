"""``gymflow eval`` on agent servers: the same rows, row for row, as the in-process loop.

Real parts: agent servers on 127.0.0.1 (uvicorn; two replicas), the embedded micro model
(sampled, two samples per task), the tool_call environment, real Parquet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gymflow.agent.server import build_agent_app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.loopback import LoopbackServer
from gymflow.eval.splits import GeneratedSplit
from gymflow.eval.suite import EvalOptions, run_eval
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.rollout.store import read_rollouts

DIFFER = ("started_at", "latency_s", "rollout_id", "run_id")
"""Timing, and the ids named after each evaluation's own id."""


def _evaluate(home: Path, out: Path, policy: str, agent: str | None):
    options = EvalOptions(
        envs=["tool_call"], policy=policy, split="heldout", limit=24, samples=2,
        max_new_tokens=16, out=out, mlflow=False, agent=agent,
    )  # fmt: skip
    return run_eval(options, home, GeneratedSplit.like(LifecycleConfig()))


def _rows(out: Path) -> list[dict]:
    return read_rollouts(out).sort("task_id", "sample_idx").drop(*DIFFER).to_dicts()


def test_eval_through_agent_servers_equals_the_in_process_eval(
    gym_home, micro_tool_call_model, tmp_path
):
    policy = f"transformers:{micro_tool_call_model}"
    local = _evaluate(gym_home, tmp_path / "local", policy, None)
    with LoopbackServer(build_agent_app()) as a, LoopbackServer(build_agent_app()) as b:
        remote = _evaluate(gym_home, tmp_path / "agent", policy, f"{a.url},{b.url}")
        served = [a.app.state.episodes, b.app.state.episodes]
    assert sum(served) == 48 and min(served) > 0  # both replicas ran episodes
    ours, theirs_rows = _rows(tmp_path / "local"), _rows(tmp_path / "agent")
    # everything equal but the logprobs, which are equal to float rounding (another batch shape)
    assert [_no_logprobs(r) for r in theirs_rows] == [_no_logprobs(r) for r in ours]
    gaps = [
        abs(x - y)
        for a, b in zip(ours, theirs_rows, strict=True)
        for x, y in zip(a["logprobs"], b["logprobs"], strict=True)
    ]
    assert len(gaps) > 48 and max(gaps) < 1e-4
    mine, theirs = local.policies[0], remote.policies[0]
    for key in ("success", "reward", "well_formed", "failures"):
        assert mine.overall[key] == theirs.overall[key]
    assert [_bare(r) for r in mine.rows] == [_bare(r) for r in theirs.rows]


def _no_logprobs(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "logprobs"}


def _bare(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in DIFFER}


def test_eval_with_an_agent_server_that_refuses_the_policy_is_one_line(gym_home, tmp_path):
    with LoopbackServer(build_agent_app()) as server, pytest.raises(GymflowError) as exc:
        _evaluate(gym_home, tmp_path / "x", "transformers:/no/such/folder", server.url)
    assert exc.value.kind is FailureKind.BAD_REQUEST
