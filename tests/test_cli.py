"""The command line: environment listing and the environment self-check."""

from __future__ import annotations

from typer.testing import CliRunner

from gymflow.cli import app

runner = CliRunner()


def test_env_list_names_tool_call():
    result = runner.invoke(app, ["env", "list"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("tool_call\t")


def test_env_check_passes_for_tool_call():
    result = runner.invoke(app, ["env", "check", "tool_call", "--n", "100"])
    assert result.exit_code == 0, result.output
    assert "0 problems" in result.output


def test_env_check_unknown_env_is_a_clear_error():
    result = runner.invoke(app, ["env", "check", "no_such_env"])
    assert result.exit_code != 0
    assert "unknown environment 'no_such_env'" in str(result.exception)
