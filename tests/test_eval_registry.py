"""``models:/NAME@ALIAS`` and ``models:/NAME/VERSION`` through a real MLflow sqlite registry in a
temporary home: the version is registered as the lifecycle registers it, downloaded once into
the home's cache, evaluated like the same model from its folder, and the evaluation run is
linked to the version (tags on the version, metrics on its logged model)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.rollout.store import read_rollouts

NAME = "gymflow-evaltest"


@pytest.fixture(scope="module")
def registered(gym_home, micro_tool_call_model) -> str:
    import mlflow

    from gymflow.lifecycle.model_registry import register_candidate
    from gymflow.lifecycle.tracking import configure

    configure(gym_home)  # this home's store, whatever an earlier test module pointed MLflow at
    with mlflow.start_run(run_name="register-for-eval-test"):
        version = register_candidate(micro_tool_call_model, NAME, {"origin": "test"})
    mlflow.MlflowClient().set_registered_model_alias(NAME, "champion", version)
    return version


def gymflow_eval(*args: str):
    return CliRunner().invoke(app, ["eval", "--env", "tool_call", "--limit", "12", *args])


def test_alias_resolves_downloads_once_and_matches_the_folder(
    gym_home, micro_tool_call_model, registered, tmp_path
):
    cache = gym_home / ".cache" / "registry" / NAME / f"v{registered}"
    first = gymflow_eval("--policy", f"models:/{NAME}@champion", "--against",
                         f"transformers:{micro_tool_call_model}", "--out", str(tmp_path / "a"))  # fmt: skip
    assert first.exit_code == 0, first.output
    weights = cache / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    second = gymflow_eval("--policy", f"models:/{NAME}/{registered}", "--out",
                          str(tmp_path / "b"), "--no-mlflow")  # fmt: skip
    assert second.exit_code == 0, second.output
    assert weights.stat().st_mtime_ns == stamp, "a version is downloaded once"
    assert {p.name for p in cache.iterdir()} >= {"config.json", "tokenizer.json"}

    a, b = read_rollouts(tmp_path / "a").sort("task_id"), read_rollouts(tmp_path / "a" / "against")
    cols = ["task_id", "reward", "trajectory"]
    assert a.select(cols).equals(b.sort("task_id").select(cols)), "the same weights, greedy"
    assert set(a["policy"]) == {f"models:/{NAME}/{registered}"}, "lineage pins the version"
    assert set(a["policy_version"]) == {int(registered)}


def test_the_evaluation_run_is_linked_to_the_version(gym_home, registered, tmp_path):
    from mlflow import MlflowClient

    result = gymflow_eval("--policy", f"models:/{NAME}@champion", "--out", str(tmp_path / "c"))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.split("MLflow run ")[1].split()[0]
    client = MlflowClient()
    version = client.get_model_version(NAME, registered)
    assert version.tags["gymflow.eval.last_run"] == run_id
    summary = json.loads((tmp_path / "c" / "report" / "summary.json").read_text())
    success = summary["policies"][0]["per_env"]["tool_call"]["success"]
    assert version.tags["gymflow.eval.heldout.tool_call.success"].startswith(f"{success:.3f} [")
    run = client.get_run(run_id)
    assert run.data.tags["gymflow.policy"] == f"models:/{NAME}/{registered}"
    model_id = version.source.removeprefix("models:/")
    linked = {m.key: m.value for m in client.get_logged_model(model_id).metrics}
    assert linked["tool_call/success"] == pytest.approx(success)


def test_a_missing_alias_names_the_ones_there_are(gym_home, registered, tmp_path):
    result = gymflow_eval("--policy", f"models:/{NAME}@nope", "--out", str(tmp_path / "d"))
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert err == (
        f"error: [bad_request] {NAME} has no alias 'nope' "
        f"(versions: {registered}; aliases: challenger, champion)"
    )
