"""An evaluation whose policy cannot be reached is an error, not a score of 0: exit 1 with one
line (the kind, the URL, the attempts) and a FAILED MLflow run; a few unscored episodes under
``max_unscored`` still give a table, counted as failures."""

from __future__ import annotations

import pytest
from ports import free_port  # tests/ is on the path
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import GymflowError
from gymflow.eval.suite import _refuse_unmeasured

runner = CliRunner()


def test_an_unreachable_policy_exits_1_with_one_line_and_a_failed_mlflow_run(gym_home, tmp_path):
    import mlflow

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    result = runner.invoke(
        app, ["eval", "--env", "tool_call", "--policy", f"openai:{url}?model=m", "--limit", "4",
              "--out", str(tmp_path / "ev")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (line,) = [t for t in result.stderr.splitlines() if t.startswith("error:")]
    assert line.startswith("error: [policy_unavailable] 4 of 4 episodes of --policy openai:")
    assert f"{url}/chat/completions failed after" in line and "attempts" in line
    assert "gymflow eval" not in result.stdout  # no table
    failed = mlflow.search_runs(
        search_all_experiments=True,
        filter_string="tags.`gymflow.kind` = 'evaluation' and attributes.status = 'FAILED'",
    )
    assert len(failed) >= 1 and failed.iloc[0]["tags.gymflow.error_kind"] == "policy_unavailable"


def _rows(scored: int, unscored: int) -> list[dict]:
    down = {"scored": False, "failure_kind": "timeout", "failure_detail": "policy: slow"}
    return [{"scored": True, "failure_kind": None}] * scored + [down] * unscored


def test_max_unscored_allows_a_few_infrastructure_failures_and_no_more():
    _refuse_unmeasured("policy", "p", _rows(95, 5), 0.05)  # 5 %: a table, 5 failures in it
    with pytest.raises(GymflowError) as info:
        _refuse_unmeasured("policy", "p", _rows(94, 6), 0.05)
    assert info.value.kind == "timeout"
    assert info.value.detail.startswith("6 of 100 episodes of --policy p got no verdict")
