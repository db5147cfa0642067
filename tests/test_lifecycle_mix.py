"""A lifecycle run on a weighted mix of environments (tool_call + math), every stage on a reduced
budget, against a real Prefect engine, MLflow store and tiny model.

What is per environment is checked from what the run left: tasks and splits, verifier reports,
baseline, GRPO's stored rollouts (a group never mixes environments, every row scored by its
task's own environment) and its per-environment metrics in MLflow (equal to what the stored
rows say), held-out figures per environment in ``summary.json``, ``report.md`` and the printed
table, and the registry's mix model.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.leakage import PromptRef, find_leaks
from gymflow.data.task_table import dataset_hash, read_tasks
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_config import run_config
from gymflow.rollout.store import read_rollouts

MIX = {"tool_call": 0.6, "math": 0.4}


@pytest.fixture(scope="module")
def mix_run(gym_home, prefect_engine, tmp_path_factory):
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.run_context import open_run

    cfg = LifecycleConfig.smoke().overridden(
        {"envs": MIX, "grpo": {"max_steps": 4}, "gate": {"general_envs": ["math", "games"]}}
    )
    ctx = open_run(gym_home, tmp_path_factory.mktemp("runs") / "mix-smoke", cfg)
    return ctx, cfg, lifecycle(ctx, cfg)


def _stage_run(parent_id: str, stage: str):
    import mlflow
    from mlflow import MlflowClient

    exp = mlflow.get_experiment_by_name("gymflow")
    runs = MlflowClient().search_runs(
        [exp.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent_id}' and tags.`gymflow.stage` = '{stage}'",
    )
    assert len(runs) == 1
    return runs[0]


def test_tasks_are_generated_split_and_checked_per_environment(mix_run):
    ctx, cfg, _ = mix_run
    data = Path(ctx.run_dir) / "data"
    splits = {s: read_tasks(data / f"tasks-{s}.parquet") for s in ("train", "val", "heldout")}
    for name in MIX:
        mine = {s: [t for t in tasks if t.env == name] for s, tasks in splits.items()}
        assert all(mine.values()), f"{name} has tasks in every split"
        assert all(t.task_id.startswith(f"{name}-") for ts in mine.values() for t in ts)
        leaks = find_leaks(
            [PromptRef.of(t, "train") for t in mine["train"]],
            [PromptRef.of(t, "heldout") for t in mine["heldout"]],
            cfg.task_data.near_dup,
        )
        assert not leaks
    # drafts shared by weight: 480 tool_call and 320 math of the smoke budget's 800
    gen = _stage_run(ctx.mlflow_parent_id, "generate_tasks")
    assert json.loads(gen.data.params["env_weights"]) == MIX
    assert gen.data.params["env"] == "tool_call+math"
    names = {d.dataset.name for d in gen.inputs.dataset_inputs}
    assert names == {f"{e}-{s}" for e in MIX for s in ("train", "val", "heldout")}
    digests = {d.dataset.name: d.dataset.digest for d in gen.inputs.dataset_inputs}
    assert digests["math-heldout"] == dataset_hash(
        [t for t in splits["heldout"] if t.env == "math"]
    )
    total = sum(len(ts) for ts in splits.values())
    math_share = sum(t.env == "math" for ts in splits.values() for t in ts) / total
    assert 0.3 < math_share < 0.5, math_share


def test_the_embedded_tokenizer_was_trained_on_every_environment(mix_run):
    from transformers import AutoTokenizer

    ctx, _, _ = mix_run
    models = list((Path(ctx.home) / ".cache" / "models").glob("tiny-mix-tool_call0.6+math0.4-*"))
    assert len(models) == 1, "the mix's model is cached under the mix and its weights"
    vocab = AutoTokenizer.from_pretrained(models[0]).get_vocab()
    assert any("boxed" in token for token in vocab), "math's answers are in the corpus"
    assert any("tool_call" in token for token in vocab), "tool_call's answers are in the corpus"


def test_every_verifier_is_profiled_and_the_baseline_is_per_environment(mix_run):
    ctx, _, _ = mix_run
    reports = Path(ctx.run_dir) / "reports"
    for name in MIX:
        profile = json.loads((reports / name / "verifier_profile.json").read_text())
        assert profile["n"] > 0 and not profile["problems"]
    val = read_rollouts(Path(ctx.run_dir) / "eval" / "val-current")
    assert set(val["env"]) == set(MIX)
    base = _stage_run(ctx.mlflow_parent_id, "baseline_eval").data.metrics
    assert {"current/tool_call/success", "current/math/success", "current/success"} <= set(base)


def test_grpo_groups_never_mix_environments_and_metrics_are_per_environment(mix_run):
    from mlflow import MlflowClient

    ctx, cfg, _ = mix_run
    rollouts = read_rollouts(Path(ctx.run_dir))
    task_env = {t.task_id: t.env for t in read_tasks(Path(ctx.run_dir) / "tasks.parquet")}
    # every row is scored by its task's own environment and says so
    assert rollouts["env"].to_list() == [task_env[t] for t in rollouts["task_id"]]
    per_group = rollouts.group_by("group_id").agg(pl.col("env").n_unique().alias("envs"))
    assert per_group["envs"].max() == 1, "a group holds the samples of one task: one env"
    assert set(rollouts["env"]) == set(MIX), "both environments were drawn"
    trained = rollouts.filter(pl.col("used_for_training"))
    sizes = trained.group_by("iteration").len()["len"].to_list()
    assert set(sizes) == {cfg.grpo.prompts_per_step * cfg.grpo.num_generations}
    # the per-environment metrics of each step are what the stored rows of that step say
    grpo_run = _stage_run(ctx.mlflow_parent_id, "grpo").info.run_id
    client = MlflowClient()
    checked = 0
    for name in MIX:
        history = client.get_metric_history(grpo_run, f"rollouts/{name}/success_rate")
        steps = {m.step: m.value for m in history}
        mine = rollouts.filter(pl.col("env") == name)
        expected = mine.group_by("iteration").agg(pl.col("success").mean())
        assert steps == pytest.approx(dict(expected.iter_rows()))
        checked += len(steps)
    assert checked >= cfg.grpo.max_steps


def test_summary_report_and_table_show_every_environment(mix_run):
    from gymflow.lifecycle.summary import render_table

    ctx, _, summary = mix_run
    assert summary["envs"] == MIX and summary["env"] == "tool_call+math"
    per_env = summary["heldout"]["per_env"]
    assert set(per_env) == set(MIX)
    for held in per_env.values():
        assert held["n"] > 0 and len(held["ci95"]) == 2
        assert held["baseline"]["success_ci95"][0] <= held["baseline"]["success"]
        assert "sft_control" in held  # the control ran beside GRPO and is shown per env
    assert sum(h["n"] for h in per_env.values()) == summary["heldout"]["n"]
    table = render_table(summary)
    assert "held-out success per environment" in table and "mix (pooled)" in table
    report = (Path(ctx.run_dir) / "report.md").read_text()
    assert "| tool_call (0.6) |" in report and "| math (0.4) |" in report
    gate = summary["gate"]
    if gate["passed"]:  # the reason says each environment was checked
        assert "no environment significantly below" in gate["reason"]


def test_the_mix_registers_its_own_model(mix_run):
    from mlflow import MlflowClient

    _, cfg, summary = mix_run
    reg = summary["registry"]
    assert reg["model"] == cfg.model_name == "gymflow-mix-math-tool_call"
    tags = MlflowClient().get_model_version(reg["model"], reg["version"]).tags
    assert tags["lineage.env"] == "tool_call+math"
    assert tags["lineage.env_weights"] == "tool_call=0.6, math=0.4"
    for name in MIX:
        held = summary["heldout"]["per_env"][name]
        chosen = held["candidate"] if reg["candidate"] == "grpo" else held["sft_control"]
        assert float(tags[f"heldout.{name}.success"]) == pytest.approx(chosen["success"], abs=1e-4)


BAD_MIXES = [
    ({"envs": {"tool_call": 0.5, "mathh": 0.5}}, "envs: no environment 'mathh' (known: "),
    ({"envs": {"tool_call": 0.5, "math": -0.5}}, "envs: weight of 'math' is -0.5"),
    ({"envs": {"tool_call": 0.5, "math": 0}}, "envs: weight of 'math' is 0"),
    ({"envs": {}}, "envs: empty: name one environment or more"),
    ({"envs": ["tool_call", "math"]}, "envs: input should be a valid dictionary"),
    ({"env": "math", "envs": {"tool_call": 1, "math": 1}}, "env 'math' and envs both given"),
    (
        {"envs": {"tool_call": 1, "math": 1}, "grpo": {"task_sampling": "difficulty"}},
        'grpo.task_sampling "difficulty" is not supported with envs',
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_MIXES)
def test_gymflow_run_refuses_a_bad_mix_in_one_line_before_any_work(
    tmp_path, monkeypatch, overrides, message
):
    monkeypatch.setenv("GYMFLOW_HOME", str(tmp_path / "home"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(overrides))
    result = CliRunner().invoke(app, ["run", "--config", str(bad), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: [bad_config] ") and message in line
    assert not (tmp_path / "r").exists()  # no run folder, no MLflow run
    with pytest.raises(GymflowError) as caught:  # the deployment's path refuses it the same way
        run_config(overrides=overrides)
    assert caught.value.kind is FailureKind.BAD_CONFIG


def test_weights_are_normalized_and_env_is_the_mix_first():
    cfg = run_config(overrides={"envs": {"math": 3, "tool_call": 1}})
    assert cfg.envs == {"math": 0.75, "tool_call": 0.25} and cfg.env == "math"
    assert run_config(overrides={"env": "math", "envs": {"math": 1, "games": 1}}).env == "math"
    # a saved mix config reads back as it was; env alone ends the mix
    assert LifecycleConfig.model_validate_json(cfg.model_dump_json()) == cfg
    single = cfg.overridden({"env": "games"})
    assert single.envs is None and single.env == "games" and single.env_weights == {"games": 1.0}
    assert cfg.overridden({"registered_model": "my-agent"}).model_name == "my-agent"


def test_task_sampling_defaults_to_the_pool_on_one_env_and_uniform_on_a_mix():
    assert LifecycleConfig().grpo.task_sampling == "difficulty"
    mix = run_config(overrides={"envs": {"math": 1, "tool_call": 1}})
    assert mix.grpo.task_sampling == "uniform"  # the pool does not weigh environments
    # switching between one env and a mix re-derives it unless it was given
    assert LifecycleConfig().overridden({"envs": {"math": 1, "games": 1}}).grpo.task_sampling == (
        "uniform"
    )
    assert mix.overridden({"env": "games"}).grpo.task_sampling == "difficulty"
    kept = LifecycleConfig(grpo={"task_sampling": "uniform"}).overridden({"env": "math"})
    assert kept.grpo.task_sampling == "uniform"
