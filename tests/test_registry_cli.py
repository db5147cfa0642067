"""``gymflow models list``, ``gymflow promote`` and ``gymflow rollback`` against a real MLflow
sqlite store in a temporary GYMFLOW_HOME, with real registered model versions."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

ENV = "registry-drill"  # a model name of its own: other tests register gymflow-tool_call
NAME = f"gymflow-{ENV}"


@pytest.fixture(scope="module")
def three_versions(gym_home, micro_tool_call_model):
    """v1 and v2 passed their gate, v3 did not; champion went v1 then v2 (the lifecycle's way)."""
    import mlflow

    from gymflow.lifecycle.model_registry import move_champion, register_candidate

    with mlflow.start_run(run_name="registry-drill"):
        for number, passed in ((1, True), (2, True), (3, False)):
            tags = {
                "gymflow.run_id": f"run-{number}",
                "gymflow.candidate": "grpo" if number != 2 else "sft_control",
                "gate_passed": str(passed),
                "gate_reason": "test gate" if passed else "success gain +0.010 not significant",
                "heldout.success": f"{0.5 + number / 10:.4f}",
                "heldout_delta_success": "0.1",
                "lineage.config_digest": f"cfg{number}",
            }
            version = register_candidate(micro_tool_call_model, NAME, tags, f"version {number}")
            assert version == str(number)
            if passed:
                move_champion(NAME, version, f"gate of run-{number}")


def _gymflow(*args: str):
    from gymflow.cli.main import app

    return CliRunner().invoke(app, list(args))


def _aliases() -> dict[str, str | None]:
    from gymflow.lifecycle.model_registry import alias_version

    return {a: alias_version(NAME, a) for a in ("champion", "previous_champion", "challenger")}


def test_list_shows_versions_aliases_evidence_and_history(three_versions):
    result = _gymflow("models", "list", "--env", ENV)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    versions = [line.split("\t")[0].strip() for line in lines if line.startswith("  v")]
    assert versions == ["v3", "v2", "v1"]
    v2 = next(line for line in lines if line.startswith("  v2"))
    assert "[champion]" in v2 and "sft_control" in v2 and "gate passed" in v2
    assert "held-out success 0.700" in v2 and "config_digest=cfg2" in v2
    assert "[challenger]" in next(line for line in lines if line.startswith("  v3"))
    assert "[previous_champion]" in next(line for line in lines if line.startswith("  v1"))
    history = lines[lines.index("alias history:") + 1 :]
    assert any("champion: none -> v1 (gate of run-1)" in h for h in history)
    assert any("champion: v1 -> v2 (gate of run-2)" in h for h in history)


def test_promote_refuses_a_failed_gate_without_force(three_versions):
    before = _aliases()
    result = _gymflow("promote", "3", "--env", ENV)
    assert result.exit_code == 2
    assert "did not pass its gate (success gain +0.010 not significant)" in result.output
    assert _aliases() == before


def test_promote_unknown_version_names_the_known_ones(three_versions):
    result = _gymflow("promote", "9", "--env", ENV)
    assert result.exit_code == 2 and "no version '9' (versions: 3, 2, 1)" in result.output
    assert "Traceback" not in result.output


def test_unregistered_model_is_one_line(gym_home):
    result = _gymflow("models", "list", "--env", "never-registered")
    assert result.exit_code == 2
    assert result.output.strip().startswith(
        "error: [bad_request] no registered model gymflow-never-registered"
    )


def test_promote_then_rollback_walks_the_history(three_versions):
    """Forced promote of v3, then rollbacks: v3 → v2 → v1, then nothing left to roll back to."""
    from gymflow.lifecycle.model_registry import alias_history

    result = _gymflow("promote", "v3", "--env", ENV, "--force", "--reason", "hotfix")
    assert result.exit_code == 0, result.output
    assert _aliases() == {"champion": "3", "previous_champion": "2", "challenger": "3"}

    result = _gymflow("rollback", "--env", ENV)
    assert result.exit_code == 0, result.output
    assert "champion v2 (was v3); previous_champion v1" in result.output
    assert _aliases()["champion"] == "2" and _aliases()["previous_champion"] == "1"

    assert _gymflow("rollback", "--env", ENV).exit_code == 0
    assert _aliases()["champion"] == "1" and _aliases()["previous_champion"] is None

    result = _gymflow("rollback", "--env", ENV)
    assert result.exit_code == 2 and "no previous_champion to roll back to" in result.output
    assert _aliases()["champion"] == "1"

    moves = [entry.split(" ", 1)[1] for entry in alias_history(NAME)]
    champion_moves = [m.split(" (")[0] for m in moves if m.startswith("champion:")]
    assert champion_moves == [
        "champion: none -> v1",
        "champion: v1 -> v2",
        "champion: v2 -> v3",
        "champion: v3 -> v2",
        "champion: v2 -> v1",
    ]
    assert any("hotfix (gymflow promote)" in m for m in moves)
    assert any("manual rollback (gymflow rollback)" in m for m in moves)


def test_name_reaches_any_registered_model(three_versions):
    """``--name``: a custom ``registered_model`` or a mix's model is reached by its name."""
    by_name = _gymflow("models", "list", "--name", NAME)
    assert by_name.exit_code == 0, by_name.output
    assert by_name.output == _gymflow("models", "list", "--env", ENV).output
    result = _gymflow("promote", "9", "--name", NAME)
    assert result.exit_code == 2 and "no version '9' (versions: 3, 2, 1)" in result.output
    missing = _gymflow("models", "list", "--name", "my-custom-model")
    assert missing.exit_code == 2
    (line,) = missing.output.strip().splitlines()
    assert line.startswith("error: [bad_request] no registered model my-custom-model")
    assert "registered: " in line and NAME in line and "pass --name" in line


def test_models_list_on_a_home_with_no_model_says_so_and_creates_nothing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from gymflow.cli.main import app

    home = tmp_path / "fresh"
    home.mkdir()
    monkeypatch.setenv("GYMFLOW_HOME", str(home))
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "GYMFLOW_HOME_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"no registered models yet in {home / 'mlruns'}")
    assert list(home.iterdir()) == []  # no store made for nothing
