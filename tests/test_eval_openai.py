"""``gymflow eval`` with the ``openai`` backend against a real ``gymflow policy serve`` process on
127.0.0.1, paired with the same model in-process: greedy answers, rewards and token counts
must agree task by task, and the cost comes from the usage the server reports."""

from __future__ import annotations

import json

import polars as pl
import pytest
from policy_server import free_port, served_policy
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.rollout.store import read_rollouts


@pytest.fixture(scope="module")
def served(micro_tool_call_model):
    """``gymflow policy serve`` of the micro model, as its own process."""
    with served_policy(str(micro_tool_call_model), "micro") as url:
        yield url


def test_served_policy_is_evaluated_like_the_same_model_in_process(
    gym_home, micro_tool_call_model, served, tmp_path
):
    out = tmp_path / "served"
    result = CliRunner().invoke(
        app,
        ["eval", "--env", "tool_call", "--policy", f"openai:{served}?model=micro",
         "--against", f"transformers:{micro_tool_call_model}", "--split", "heldout",
         "--limit", "16", "--price-prompt", "1.5", "--price-completion", "6",
         "--out", str(out), "--no-mlflow"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    served_rows = read_rollouts(out).sort("task_id")
    local_rows = read_rollouts(out / "against").sort("task_id")
    assert served_rows.height == local_rows.height == 16
    assert served_rows["policy"][0] == f"openai:{served}?model=micro"
    same = ["task_id", "seed", "reward", "failure_kind", "trajectory"]
    assert served_rows.select(same).equals(local_rows.select(same)), "greedy: the same answers"

    summary = json.loads((out / "report" / "summary.json").read_text())
    over_http, in_process = (p["overall"] for p in summary["policies"])
    assert over_http["success"] == in_process["success"]
    paired = summary["comparison"]["overall"]["reward"]
    assert paired["delta"] == 0 and paired["ci95"] == [0, 0]
    # The server's usage counts the tokens the in-process episodes hold (one turn each).
    usage = over_http["usage"]
    assert in_process["usage"] is None, "the in-process backend reports no usage"
    assert usage["prompt_tokens"] + usage["completion_tokens"] == local_rows["tokens"].sum()
    completion = local_rows.select(pl.col("completion_ids").list.len().sum()).item()
    assert usage["completion_tokens"] == completion
    assert over_http["tokens"] == in_process["tokens"], "tokens per episode, from usage or view"
    assert usage["cost_usd"] == pytest.approx(
        (usage["prompt_tokens"] * 1.5 + usage["completion_tokens"] * 6) / 1e6
    )
    assert "cost USD" in (out / "report" / "report.md").read_text()


def test_a_server_that_went_away_is_a_failure_bucket_not_a_crash(gym_home, tmp_path):
    """Its episodes are failures (no reward, never a silent 0), bucketed; over ``max_unscored``
    the evaluation is an error — allowed here (``--max-unscored 1``) to see the buckets."""
    dead = f"openai:http://127.0.0.1:{free_port()}/v1?model=m&retries=0&timeout_s=2"
    out = tmp_path / "dead"
    result = CliRunner().invoke(
        app,
        ["eval", "--env", "tool_call", "--policy", dead, "--limit", "4", "--out", str(out),
         "--no-mlflow", "--max-unscored", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    m = json.loads((out / "report" / "summary.json").read_text())["policies"][0]["overall"]
    assert m["success"] == 0 and m["scored"] == 0
    assert [(b["kind"], b["category"], b["count"]) for b in m["failure_buckets"]] == [
        ("policy_unavailable", "policy error", 4)
    ]
    rows = read_rollouts(out)
    assert rows["reward"].null_count() == 4, "no verdict is no reward, never a silent 0"
