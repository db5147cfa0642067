"""A wrong run configuration is refused in one line naming the field, before any work; a
resumed run takes fixes on top of its saved config."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_config import read_overrides, run_config

BAD = [
    ({"gate": {"min_delta_sucess": 0.15}}, "gate.min_delta_sucess: unknown key (did you mean"),
    ({"grpo": {"max_steps": 0}}, "grpo.max_steps: input should be greater than or equal to 1"),
    ({"grpo": {"time_budget_s": -5}}, "grpo.time_budget_s: input should be greater than 0"),
    ({"demos": -1}, "demos: input should be greater than or equal to 1"),
    ({"sft": {"learning_rate": 3}}, "sft.learning_rate: input should be less than or equal to 1"),
    ({"tiny_model": {"hidden_size": 65}}, "tiny_model"),
    ({"gate": {"max_well_formed_drop": 2}}, "gate.max_well_formed_drop"),
    ({"heldout_frac": 0.5, "val_frac": 0.45}, "keep their sum below 0.9"),
    ({"n_taks": 100}, "n_taks: unknown key (did you mean 'n_tasks'?)"),
    ({"env": "no_such_env"}, "env: no environment 'no_such_env' (known: "),
]


@pytest.mark.parametrize(("overrides", "message"), BAD)
def test_bad_settings_are_refused_naming_the_field(overrides, message):
    with pytest.raises(GymflowError) as caught:
        run_config(overrides=overrides)
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert message in caught.value.detail
    assert "\n" not in str(caught.value)


def test_every_problem_is_named_at_once():
    with pytest.raises(GymflowError) as caught:
        run_config(overrides={"grpo": {"max_steps": 0, "num_generations": 1}, "demoz": 3})
    detail = caught.value.detail
    assert "grpo.max_steps" in detail and "grpo.num_generations" in detail and "demoz" in detail


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"grpo": {"max_steps": 3,}}', "not JSON (Expecting property name"),
        ("[1, 2]", "a JSON object of config fields is expected, got list"),
        (b"\xff\xfe{", "cannot read it"),
    ],
)
def test_a_broken_file_is_refused(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(GymflowError) as caught:
        read_overrides(path)
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert message in caught.value.detail


def test_a_resumed_run_takes_fixes_on_top_of_its_saved_config(tmp_path):
    saved = tmp_path / "config.json"
    base = LifecycleConfig.smoke().overridden({"grpo": {"learning_rate": 2e-4}, "demos": 40})
    saved.write_text(base.model_dump_json())
    fixed = run_config(saved, {"grpo": {"max_steps": 5}}, seed=7)
    assert fixed.grpo.max_steps == 5
    assert fixed.grpo.learning_rate == 2e-4  # the rest of the saved config is kept
    assert fixed.demos == 40 and fixed.seed == 7
    assert fixed.n_tasks == LifecycleConfig.smoke().n_tasks  # not the full default
    assert run_config(saved) == base


def test_gymflow_run_refuses_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_HOME", str(tmp_path / "home"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gate": {"min_delta_sucess": 0.15}}))
    result = CliRunner().invoke(app, ["run", "--config", str(bad), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        "error: [bad_config] gate.min_delta_sucess: unknown key (did you mean 'min_delta_success'?)"
    ]
    assert not (tmp_path / "r").exists()  # no run folder, no MLflow run


def test_the_deployment_refuses_a_bad_config_before_serving(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"grpo": {"max_steps": 0}}')
    done = subprocess.run(
        [sys.executable, "-m", "gymflow.deployments.lifecycle", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GYMFLOW_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: [bad_config] grpo.max_steps: input should be greater than or equal to 1 (got 0)"
    ]
