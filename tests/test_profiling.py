"""Verifier profiling: policy samples, gold, probes, each scored in two processes; broken
verifiers planted (``planted_envs``) stop the lifecycle flow before training.

Real parts: the in-process resources server, a real (micro, untrained) transformers policy
sampling at temperature 1, two spawned scoring processes, a real Prefect engine and MLflow.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import pytest
from planted_envs import PlantedPerProcess, registered

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.settings import TaskDataSettings
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.eval.profile_report import profile_summary, samples_html, samples_markdown
from gymflow.eval.profiling import profile_verifier
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.rollout.episode import Sampling

SAMPLED = Sampling(max_new_tokens=24, temperature=1.0)


@pytest.fixture(scope="module", autouse=True)
def planted(tmp_path_factory):
    with registered(tmp_path_factory.mktemp("planted")):
        yield


def val_tasks(name: str, n: int = 300):
    return [t for t in build_tasks(get_env(name), n, 1, 0.1, 0.1) if t.split == "val"]


@pytest.fixture(scope="module")
def micro_policy(micro_tool_call_model):
    from gymflow.policy.transformers_backend import TransformersPolicy

    return TransformersPolicy.from_path(str(micro_tool_call_model))


def test_most_samples_come_from_the_policy_scored_in_two_other_processes(micro_policy):
    env = get_env("tool_call")
    report = profile_verifier(env, val_tasks("tool_call"), 60, 0, micro_policy, SAMPLED)
    summary = profile_summary(report, env.reward_range)
    assert summary["n"] == 60 and not summary["problems"]
    assert summary["sources"]["policy"] >= 40 and summary["sources"]["gold"] >= 6
    kinds = {p.name for p in env.probes(report.samples[0].task)}
    assert {p["probe"] for p in summary["probes"]} == kinds, "every probe kind at least once"
    pids = {s.pid for s in report.first} | {s.pid for s in report.second}
    assert len(pids) == 2 and os.getpid() not in pids
    assert summary["determinism"] == {
        "compared": 60, "differing": 0, "differing_samples": [], "processes": sorted(pids)
    }  # fmt: skip
    assert summary["verify_latency_ms"]["first_process"]["p50"] > 0
    # the tables hold every trajectory whole, however long
    longest = max((r["trajectory"] for r in summary["rows"]), key=len)
    assert len(longest) > 200
    markdown = samples_markdown(summary)
    assert all(html.escape(line, quote=False) in markdown for line in longest.splitlines())
    assert samples_html(summary).count("<tr>") == 61


def test_without_a_policy_gold_and_probes_fill_the_budget():
    env = get_env("planted_words")
    report = profile_verifier(env, val_tasks("planted_words"), 50, 0, None, SAMPLED)
    summary = profile_summary(report, env.reward_range)
    assert summary["n"] == 50 and summary["policy_share"] == 0 and not report.problems
    assert summary["by_source"]["gold"]["mean_reward"] == 1.0
    assert summary["by_source"]["probe"]["max_reward"] == 0.0


def test_a_verifier_that_differs_across_processes_is_caught():
    env = get_env("planted_process")
    tasks = val_tasks("planted_process")
    items = prompt_items(tasks[0].prompt) + assistant_items("not the word", 0)
    assert env.verify(tasks[0], items) == env.verify(tasks[0], items), "same in one process"
    report = profile_verifier(env, tasks, 50, 0, None, SAMPLED)
    kinds = {kind for kind, _ in report.problems}
    assert FailureKind.VERIFIER_NONDETERMINISTIC in kinds
    with pytest.raises(GymflowError) as caught:
        report.raise_for_problems()
    assert caught.value.kind == FailureKind.VERIFIER_NONDETERMINISTIC
    assert "in process" in str(caught.value) and "verifier_nondeterministic" in str(caught.value)
    assert isinstance(env, PlantedPerProcess)


def test_a_verifier_that_rewards_any_answer_is_caught():
    env = get_env("planted_any")
    report = profile_verifier(env, val_tasks("planted_any"), 50, 0, None, SAMPLED)
    with pytest.raises(GymflowError) as caught:
        report.raise_for_problems()
    assert caught.value.kind == FailureKind.PROBE_REWARDED
    assert "(ceiling 0" in str(caught.value)


def test_greedy_profiling_is_refused():
    with pytest.raises(GymflowError, match="temperature > 0"):
        profile_verifier(get_env("planted_words"), val_tasks("planted_words"), 10, 0, None,
                         Sampling(greedy=True))  # fmt: skip


@pytest.mark.parametrize(
    ("env", "kind"),
    [("planted_any", "probe_rewarded"), ("planted_process", "verifier_nondeterministic")],
)
def test_a_broken_verifier_stops_the_flow_before_training(
    env, kind, gym_home, prefect_engine, micro_tool_call_model, tmp_path
):
    from mlflow import MlflowClient

    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.tracking import parent_run_id, stage_runs

    run_id = f"broken-{env}"
    ctx = RunContext(
        run_id=run_id, run_dir=str(tmp_path / run_id), home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )  # fmt: skip
    cfg = LifecycleConfig(
        env=env, n_tasks=200, model_path=str(micro_tool_call_model), profile_samples=50,
        max_new_tokens=16, task_data=TaskDataSettings(recorded_heldout=False),
    )  # fmt: skip
    with pytest.raises(GymflowError, match=rf"\[{kind}\] verifier profiling stopped the run"):
        lifecycle(ctx, cfg)
    stages = stage_runs(ctx.mlflow_parent_id)
    assert set(stages) == {"generate_tasks", "resolve_policy", "profile_verifier"}
    assert not {"sft", "grpo", "rollouts"} & {p.name for p in Path(ctx.run_dir).iterdir()}
    logged = {a.path for a in MlflowClient().list_artifacts(stages["profile_verifier"], "reports")}
    assert {"reports/verifier_samples.md", "reports/verifier_samples.html"} <= logged
