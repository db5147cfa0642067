"""The command line as a newcomer meets it: help that lists every command without importing
them, a version, completion, one error line with its kind, and the config seen and set.

Speed itself is measured in ``benchmarks/cli_start.py``, not asserted here; what is asserted is
the reason it is fast: ``gymflow --help`` imports none of the library's heavy dependencies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer import _click
from typer.testing import CliRunner

from gymflow.cli.commands import COMMANDS
from gymflow.cli.lazy_group import load_command
from gymflow.cli.main import app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_config import parse_sets, run_config

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
HEAVY = ("pandas", "pandera", "polars", "pydantic", "torch", "prefect", "mlflow", "rich")
runner = CliRunner()


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _walk(command: _click.Command, path: str):
    """``(path, command)`` for a command and every subcommand under it."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _walk(sub, f"{path} {name}")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_table_says_what_each_command_says(name):
    command = load_command(name)
    assert _first_paragraph(command.help or "") == COMMANDS[name].help
    assert len(COMMANDS[name].help) <= 64, "gymflow --help cuts longer lines at 80 columns"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_and_option_has_help(name):
    missing = []
    for path, command in _walk(load_command(name), name):
        if not command.help:
            missing.append(path)
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if not getattr(param, "help", None):
                missing.append(f"{path} {param.opts or param.name}")
    assert not missing, missing


def _imported_by(*args: str) -> tuple[str, set[str]]:
    """What ``gymflow ARGS`` prints, and the top-level packages it imported."""
    probe = (
        f"import sys, runpy; sys.argv = ['gymflow', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('gymflow.cli.main', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout, set(done.stderr.split())


def test_help_lists_every_command_and_imports_nothing_heavy():
    stdout, imported = _imported_by("--help")
    assert not imported & set(HEAVY), imported & set(HEAVY)
    listed = [line.split()[0] for line in stdout.split("Commands:")[1].splitlines() if line]
    assert listed == list(COMMANDS)
    assert "--version" in stdout


def test_a_subcommands_help_imports_nothing_heavy_either():
    stdout, imported = _imported_by("run", "--help")
    assert "--set KEY=VALUE" in stdout
    assert not imported & set(HEAVY), imported & set(HEAVY)


def test_version():
    done = subprocess.run([GYMFLOW, "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("gymflow 0.")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["rnu"], "No such command 'rnu'; did you mean 'run'?"),
        (["run", "--seeed", "3"], "No such option: --seeed"),
        (["env", "check"], "Missing argument 'name'"),
        (["completion", "tcsh"], "no completion for shell 'tcsh'"),
    ],
)
def test_a_usage_error_is_one_line_with_its_kind(args, expected):
    done = subprocess.run([GYMFLOW, *args], capture_output=True, text=True)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: [bad_request] ") and expected in line, line


def test_completion_script_and_a_tab():
    script = subprocess.run([GYMFLOW, "completion", "bash"], capture_output=True, text=True)
    assert "_GYMFLOW_COMPLETE=complete_bash" in script.stdout and "complete " in script.stdout
    env = os.environ | {
        "_GYMFLOW_COMPLETE": "complete_bash", "COMP_WORDS": "gymflow con", "COMP_CWORD": "1",
    }  # fmt: skip
    tab = subprocess.run([GYMFLOW], env=env, capture_output=True, text=True)
    assert tab.stdout.split() == ["config"], tab.stdout + tab.stderr
    env |= {"COMP_WORDS": "gymflow env ch", "COMP_CWORD": "2"}
    tab = subprocess.run([GYMFLOW], env=env, capture_output=True, text=True)
    assert tab.stdout.split() == ["check"], tab.stdout + tab.stderr


def test_config_show_is_the_default_with_every_field(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_HOME", str(tmp_path))
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == LifecycleConfig().model_dump(mode="json")


def test_config_show_takes_sets_and_files_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_HOME", str(tmp_path))
    fix = tmp_path / "fix.json"
    fix.write_text(json.dumps({"grpo": {"max_steps": 7}, "demos": 50}))
    args = ["config", "show", "--smoke", "--config", str(fix), "--set", "grpo.learning_rate=1e-4"]
    args += ["--set", "gate.general_sets=[bfcl:simple_python]", "--set", "demos=60"]
    shown = json.loads(runner.invoke(app, args).stdout)
    cfg = LifecycleConfig.model_validate(shown)  # what --config reads back
    assert (cfg.grpo.max_steps, cfg.grpo.learning_rate, cfg.demos) == (7, 1e-4, 60)
    assert cfg.gate.general_sets == ["bfcl:simple_python"]
    assert cfg.n_tasks == LifecycleConfig.smoke().n_tasks
    changed = json.loads(runner.invoke(app, [*args, "--changed"]).stdout)
    default, smoke = LifecycleConfig(), LifecycleConfig.smoke()
    assert changed["demos"] == 60 and changed["n_tasks"] == smoke.n_tasks != default.n_tasks
    assert changed["grpo"]["max_steps"] == 7 and changed["grpo"]["learning_rate"] == 1e-4
    assert changed["gate"]["general_sets"] == ["bfcl:simple_python"]
    assert "seed" not in changed  # what neither the smoke budget nor the user changed


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            ["config", "show"],
            "--set grpo.lerning_rate: unknown key (did you mean 'learning_rate'?)",
        ),
        (
            ["run", "--smoke"],
            "--set grpo.lerning_rate: unknown key (did you mean 'learning_rate'?)",
        ),
        (["deploy", "--smoke"], "--set grpo.lerning_rate: unknown key (did you mean"),
    ],
)
def test_a_wrong_set_is_one_bad_config_line_before_any_work(tmp_path, command, expected):
    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    args = [GYMFLOW, *command, "--set", "grpo.lerning_rate=1e-4"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == f"error: [bad_config] {expected}" or line.startswith(
        f"error: [bad_config] {expected}"
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlruns").exists()


def test_config_schema_documents_every_field():
    result = runner.invoke(app, ["config", "schema"])
    schema = json.loads(result.stdout)
    assert set(schema["properties"]) == set(LifecycleConfig.model_fields)
    grpo = schema["$defs"]["GRPOSettings"]["properties"]
    assert grpo["learning_rate"]["default"] > 0 and grpo["learning_rate"]["description"]


def test_parse_sets():
    parsed = parse_sets(
        ["grpo.learning_rate=1e-4", "gate.general_sets=[bfcl:simple_python, math]",
         "env=math", "model_path=null", "sft.gradient_checkpointing=true",
         'envs={"math": 1}', "grpo.max_steps=5"]
    )  # fmt: skip
    assert parsed == {
        "grpo": {"learning_rate": 1e-4, "max_steps": 5},
        "gate": {"general_sets": ["bfcl:simple_python", "math"]},
        "env": "math",
        "model_path": None,
        "sft": {"gradient_checkpointing": True},
        "envs": {"math": 1},
    }
    for bad in ("grpo.learning_rate", "=3", "grpo..x=1", "seed=1 seed=2"):
        with pytest.raises(GymflowError) as caught:
            parse_sets(bad.split(" "))
        assert caught.value.kind is FailureKind.BAD_CONFIG


def test_sets_apply_after_the_file_and_name_their_source():
    cfg = run_config(overrides={"demos": 40}, sets=parse_sets(["demos=50"]), smoke=True)
    assert cfg.demos == 50
    with pytest.raises(GymflowError) as caught:
        run_config(sets=parse_sets(["grpo.max_steps=0"]))
    assert caught.value.detail.startswith("--set grpo.max_steps: input should be greater")


def test_the_old_run_id_spelling_still_works_and_one_spelling_is_shown():
    shown = runner.invoke(app, ["run", "--help"]).stdout
    assert "--run RUN_ID" in shown and "--run-id" not in shown
    collect = runner.invoke(app, ["rollouts", "collect", "--help"]).stdout
    assert "--run " in collect and "--run-id" not in collect
    serve = runner.invoke(app, ["policy", "serve", "--help"]).stdout
    assert "--policy" in serve and "--model" not in serve


def test_a_renamed_config_key_names_its_new_name():
    result = runner.invoke(app, ["config", "show", "--set", "gate.max_valid_json_drop=0.1"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: [bad_config] --set gate.max_valid_json_drop: renamed gate.max_well_formed_drop; "
        "write that key instead"
    )
