"""The whole lifecycle flow on a reduced budget, against a real Prefect engine and MLflow store.

Run 1 fails on purpose at the held-out gate (GYMFLOW_FAIL_AT); run 2, with the same run id,
must resume there: the earlier stages come from Prefect's cache (their MLflow stage runs exist
exactly once), and every stage leaves its artifacts, valid Parquet and a registry entry.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from gymflow.core.failures import GymflowError
from gymflow.data.leakage import PromptRef, find_leaks
from gymflow.data.schemas import EVAL_ROWS, TASKS, read_table
from gymflow.data.task_table import read_tasks
from gymflow.eval.gate import GateResult
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.stage_results import GateReport, ResolvedPolicy, TaskData
from gymflow.rollout.store import read_rollouts

STAGES_BEFORE_GATE = [
    "generate_tasks",
    "resolve_policy",
    "profile_verifier",
    "baseline_eval",
    "sft",
    "grpo",
    "sft_control",
]


@pytest.fixture(scope="module")
def finished_run(gym_home, prefect_engine, tmp_path_factory):
    import os

    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.tracking import parent_run_id

    run_id = "e2e-smoke"
    run_dir = tmp_path_factory.mktemp("runs") / run_id
    ctx = RunContext(
        run_id=run_id,
        run_dir=str(run_dir),
        home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )
    cfg = LifecycleConfig.smoke()
    os.environ["GYMFLOW_FAIL_AT"] = "heldout_gate"
    try:
        with pytest.raises(GymflowError, match="injected failure in stage heldout_gate"):
            lifecycle(ctx, cfg)
        first_outputs = sorted(p.name for p in run_dir.iterdir())
    finally:
        del os.environ["GYMFLOW_FAIL_AT"]
    summary = lifecycle(ctx, cfg)
    return ctx, cfg, summary, first_outputs


def _stage_runs(parent_id: str) -> dict[str, list]:
    import mlflow
    from mlflow import MlflowClient

    exp = mlflow.get_experiment_by_name("gymflow")
    runs = MlflowClient().search_runs(
        [exp.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(r.data.tags["gymflow.stage"], []).append(r)
    return out


def _artifacts(run_id: str, path: str = "") -> list[str]:
    from mlflow import MlflowClient

    return [a.path for a in MlflowClient().list_artifacts(run_id, path)]


def test_failed_stage_left_earlier_results(finished_run):
    _, _, _, first_outputs = finished_run
    assert {"data", "sft", "grpo", "rollouts", "eval"} <= set(first_outputs)


def test_resume_reuses_finished_stages(finished_run):
    ctx, _, summary, _ = finished_run
    runs = _stage_runs(ctx.mlflow_parent_id)
    for name in STAGES_BEFORE_GATE:
        assert len(runs[name]) == 1, f"{name} ran {len(runs[name])} times; resume must reuse it"
    assert len(runs["heldout_gate"]) == 1 and len(runs["promote"]) == 1
    assert all(r.info.status == "FINISHED" for rs in runs.values() for r in rs)


def test_every_stage_logged_its_artifacts(finished_run):
    from mlflow import MlflowClient

    ctx, _, _, _ = finished_run
    runs = {k: v[0].info.run_id for k, v in _stage_runs(ctx.mlflow_parent_id).items()}
    assert {f"data/tasks-{s}.parquet" for s in ("train", "val", "heldout")} <= set(
        _artifacts(runs["generate_tasks"], "data")
    )
    gen = MlflowClient().get_run(runs["generate_tasks"])
    assert {d.dataset.name for d in gen.inputs.dataset_inputs} == {
        "tool_call-train",
        "tool_call-val",
        "tool_call-heldout",
    }
    assert "reports/verifier_profile.json" in _artifacts(runs["profile_verifier"], "reports")
    assert "reports/verifier_profile.png" in _artifacts(runs["profile_verifier"], "reports")
    assert "eval/val-current.parquet" in _artifacts(runs["baseline_eval"], "eval")
    assert any(p.endswith(".parquet") for p in _artifacts(runs["grpo"], "rollouts"))
    assert "policy/model.safetensors" in _artifacts(runs["grpo"], "policy")
    gate_artifacts = _artifacts(runs["heldout_gate"], "eval")
    assert {"eval/heldout-baseline.parquet", "eval/heldout-candidate.parquet"} <= set(
        gate_artifacts
    )
    metrics = MlflowClient().get_run(runs["grpo"]).data.metrics
    assert "rollouts/reward_mean" in metrics and "stage_wall_s" in metrics
    assert "summary.json" in _artifacts(ctx.mlflow_parent_id)


def test_parquet_outputs_validate(finished_run):
    ctx, cfg, _, _ = finished_run
    run_dir = Path(ctx.run_dir)
    tasks = {
        s: read_table(run_dir / "data" / f"tasks-{s}.parquet", TASKS)
        for s in ("train", "val", "heldout")
    }
    # normalized prompts and near-duplicates, computed apart from the split: this can fail
    train, held = (
        read_tasks(run_dir / "data" / f"tasks-{s}.parquet") for s in ("train", "heldout")
    )
    train_refs, held_refs = (
        [PromptRef.of(t, "train") for t in train],
        [PromptRef.of(t, "heldout") for t in held],
    )
    leaks = find_leaks(train_refs, held_refs, cfg.task_data.near_dup)
    assert not leaks, f"held-out leaked into train: {[leak.describe() for leak in leaks[:3]]}"
    rollouts = read_rollouts(run_dir)  # every part validated, one row per rollout id
    assert sorted(set(rollouts["iteration"])) == list(range(cfg.grpo.max_steps))
    trained = rollouts.filter(pl.col("used_for_training")).group_by("iteration").len()
    assert set(trained["len"]) == {cfg.grpo.prompts_per_step * cfg.grpo.num_generations}
    assert set(rollouts["task_id"]) <= set(tasks["train"]["task_id"])
    evaluations = [p for p in (run_dir / "eval").iterdir() if p.is_dir()]
    assert evaluations, "evaluations store their episodes in the rollout layout"
    for folder in evaluations:  # the same layout and schema as training's rollouts
        assert read_rollouts(folder)["reward"].is_not_null().all()
    for path in (run_dir / "eval").glob("*.parquet"):
        read_table(path, EVAL_ROWS)


def test_summary_and_registry_agree_with_gate(finished_run):
    from mlflow import MlflowClient

    from gymflow.lifecycle.model_registry import champion_version

    ctx, _, summary, _ = finished_run
    on_disk = json.loads((Path(ctx.run_dir) / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    for key in ("run_id", "wall_s", "stages", "heldout", "gate", "registry"):
        assert key in summary
    held = summary["heldout"]
    assert held["n"] > 0 and len(held["ci95"]) == 2
    for side in ("baseline", "candidate"):
        assert {"success", "reward", "well_formed"} <= set(held[side])
    control = summary["sft_control"]
    assert control["wall_s"] > 0 and control["steps"] > 0
    # it ran beside GRPO, for GRPO's training wall time, with as many threads
    assert control["beside_grpo"] is True
    assert control["budget_s"] == summary["grpo"]["train_wall_s"]
    assert summary["grpo"]["threads"] >= 1
    machine = summary["machine"]  # GRPO's steps depend on it: runs say where they ran
    assert machine["cores"] == os.cpu_count() and machine["cpu"]
    assert f"Machine: {machine['cpu']}" in (Path(ctx.run_dir) / "report.md").read_text()
    pre = summary["grpo"]["preflight"]  # the RL-readiness preflight, beside what GRPO measured
    assert pre["verdict"] in {"in_band", "too_easy", "too_hard", "flat"} and pre["tasks"] > 0
    assert summary["grpo"]["zero_variance_share"] is not None
    assert "GRPO preflight: " in (Path(ctx.run_dir) / "report.md").read_text()
    reg = summary["registry"]
    version = MlflowClient().get_model_version(reg["model"], reg["version"])
    assert version.tags["gate_passed"] == str(summary["gate"]["passed"])
    assert reg["champion_alias_moved"] == summary["gate"]["passed"]
    assert (champion_version(reg["model"]) == reg["version"]) == summary["gate"]["passed"]


def _gate(passed: bool, delta: float, path: str) -> GateReport:
    decision = GateResult(passed=passed, reason="test", chosen="grpo")
    rates = {"success": 0.5, "well_formed": 1.0, "unsafe_rate": 0.0}
    return GateReport(
        n=1,
        baseline=rates,
        candidate=rates,
        delta_success=delta,
        ci95=[delta, delta],
        gate=decision,
        chosen_path=path,
    )


def test_promote_moves_champion_only_when_gate_passes(finished_run):
    from gymflow.lifecycle.model_registry import champion_version
    from gymflow.tasks.promote import promote

    ctx, cfg, summary, _ = finished_run
    policy = str(Path(ctx.run_dir) / "grpo" / "final")
    data = TaskData(paths={}, counts={}, dataset_hash="d", env_version="1")
    start = ResolvedPolicy(path=policy, source="test", champion_version=None)
    name = summary["registry"]["model"]
    before = champion_version(name)
    refused = promote.fn(ctx, cfg, data, start, _gate(False, 0.0, policy))
    assert refused.champion_alias_moved is False and champion_version(name) == before
    accepted = promote.fn(ctx, cfg, data, start, _gate(True, 0.2, policy))
    assert accepted.champion_alias_moved is True and champion_version(name) == accepted.version
    again = promote.fn(ctx, cfg, data, start, _gate(True, 0.2, policy))
    assert champion_version(name) == again.version and again.previous_champion == accepted.version


@pytest.mark.parametrize("fmt", ["hf", "dpo", "sft", "nemo_gym"])
@pytest.mark.parametrize("where", ["run", "rollouts", "heldout-eval"])
def test_rollouts_export_reads_a_lifecycle_run(finished_run, tmp_path, fmt, where):
    """What the product trains on and evaluates with, ``gymflow rollouts export`` exports."""
    from typer.testing import CliRunner

    from gymflow.cli.main import app

    ctx, _, _, _ = finished_run
    run_dir = Path(ctx.run_dir)
    src = {
        "run": run_dir,
        "rollouts": run_dir / "rollouts",
        "heldout-eval": next(
            p for p in (run_dir / "eval").iterdir() if p.is_dir() and p.name.startswith("heldout")
        ),
    }[where]
    out = tmp_path / ("hf" if fmt == "hf" else f"{fmt}.jsonl")
    result = CliRunner().invoke(
        app, ["rollouts", "export", "--in", str(src), "--format", fmt, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    expected = read_rollouts(src)
    if fmt == "hf":
        from datasets import load_from_disk

        assert load_from_disk(str(out)).num_rows == expected.height
        return
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    groups = (
        expected.filter(pl.col("reward").is_not_null())
        .group_by("group_id")
        .agg(best=pl.col("reward").max(), worst=pl.col("reward").min())
    )
    if fmt == "nemo_gym":
        assert len(rows) == expected.filter(pl.col("reward").is_not_null()).height
    elif fmt == "sft":  # the best of each group that reached reward 1.0
        assert len(rows) == groups.filter(pl.col("best") >= 1.0).height
        assert all(r["reward"] >= 1.0 for r in rows)
    else:  # dpo: best vs worst of each group whose rewards differ
        assert len(rows) == groups.filter(pl.col("best") > pl.col("worst")).height
        assert all(r["chosen_reward"] > r["rejected_reward"] for r in rows)


def test_every_logged_metric_is_in_the_metrics_reference(finished_run):
    """Every metric the run logged to MLflow (its parent run and every stage run) is one the
    docs' generated metrics reference names (``docs/hooks/refgen/metrics_ref.py``: read from
    the code's log calls and the trainers' source), ``<placeholders>`` matching any text."""
    import re
    import sys

    from mlflow import MlflowClient

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "hooks"))
    from refgen.metrics_ref import gymflow_metrics, trainer_metrics

    ctx = finished_run[0]
    runs = [MlflowClient().get_run(ctx.mlflow_parent_id)]
    runs += [r for rs in _stage_runs(ctx.mlflow_parent_id).values() for r in rs]
    logged = {name for r in runs for name in r.data.metrics}
    documented = [*gymflow_metrics(), *(n for names in trainer_metrics().values() for n in names)]
    patterns = [re.compile(re.sub(r"<[^>]+>", ".+", re.escape(n)) + r"\Z") for n in documented]
    assert {"stage_wall_s", "gate_passed", "rollouts/zero_variance_share"} <= logged
    missing = sorted(m for m in logged if not any(p.match(m) for p in patterns))
    assert not missing, f"metrics logged but not in the docs' metrics reference: {missing}"


@pytest.mark.parametrize("where", ["rollouts", "heldout-eval"])
def test_a_smoke_runs_rollouts_exported_rescore_as_recorded(finished_run, tmp_path, where):
    """The model's own episodes (GRPO's and the gate's), exported in NeMo Gym's format, score
    exactly as at training time through ``gymflow verify`` and a served ``/verify``."""
    from rescore import assert_rescored_as_recorded  # tests/ is on the path
    from typer.testing import CliRunner

    from gymflow.cli.main import app

    ctx, cfg, _, _ = finished_run
    run_dir = Path(ctx.run_dir)
    src = run_dir / "rollouts"
    if where == "heldout-eval":
        src = next(
            p for p in (run_dir / "eval").iterdir() if p.is_dir() and p.name.startswith("heldout")
        )
    tasks_file = tmp_path / "tasks.jsonl"
    tasks = [
        t for s in ("train", "heldout") for t in read_tasks(run_dir / f"data/tasks-{s}.parquet")
    ]
    tasks_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
    out = tmp_path / "nemo.jsonl"
    args = ["rollouts", "export", "--in", str(src), "--format", "nemo_gym", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(r["failure_kind"] for r in rows)  # a model's own mistakes, not only gold answers
    assert_rescored_as_recorded(cfg.env, tasks_file, rows, tmp_path)
