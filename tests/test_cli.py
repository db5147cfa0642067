"""The command line: environment listing and the environment self-check."""

from __future__ import annotations

from typer.testing import CliRunner

from gymflow.cli.main import app

runner = CliRunner()


def test_env_list_names_tool_call():
    result = runner.invoke(app, ["env", "list"])
    assert result.exit_code == 0, result.output
    names = [line.split("\t")[0] for line in result.output.splitlines()]
    assert {"tool_call", "counter"} <= set(names)


def test_env_check_passes_for_every_environment():
    for name in ("tool_call", "counter"):
        result = runner.invoke(app, ["env", "check", name, "--n", "60"])
        assert result.exit_code == 0, result.output
        assert "0 problems" in result.output


def test_env_check_unknown_env_is_a_clear_error():
    result = runner.invoke(app, ["env", "check", "no_such_env"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # no traceback
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: [bad_request] unknown environment 'no_such_env'; known: ")
    assert "counter" in line
