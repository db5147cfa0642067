"""Held-out BFCL as an external evaluation set: fetched from its pinned PyPI wheel (the real
fetch, as CI does it: once into the project's cache), read by the tool_call environment's
``--format bfcl`` importer, a ``gymflow eval --split``, and the gate's general-capability
guardrail (``gate.general_sets``) with its before/after figures and paired CIs.

The gate test reuses ``test_gate_champion``'s planted environments and steered micro models
(``silent`` answers nothing, ``chatty`` writes "aaaa…"): silence beats a chatty start on
``planted_silence``, and neither writes a tool call, so both score 0 on BFCL — known in
advance, while the gate fetches, evaluates, pairs and records on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gate_policies  # tests/ is on the path: module fixtures shared by the gate tests
import mlflow
import polars as pl
import pytest
from gate_policies import TOKENS

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.paths import cache_dir
from gymflow.core.pinned_wheel import file_sha256
from gymflow.data.data_catalog import CATALOG, SETS, data_dir, fetch, set_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import Checkpoint

PROJECT_CACHE = cache_dir()
"""Read at collection, before any fixture points GYMFLOW_HOME elsewhere: where ``make test``'s
``gymflow tasks fetch bfcl`` put the files, so CI downloads the wheel once."""
GYMFLOW = str(Path(sys.executable).parent / "gymflow")
BAD_GOLD = {
    # BFCL's own possible answers leave out a required parameter (its checker fails them too)
    "live_simple_106-63-0": "simple_function_checker:missing_required 'auto_loan_payment_start'",
    "live_simple_112-68-0": "simple_function_checker:missing_required 'acc_routing_start'",
}

planted = gate_policies.planted
policies = gate_policies.policies


@pytest.fixture(scope="module")
def bfcl() -> Path:
    return fetch("bfcl", PROJECT_CACHE)


def _home_with_bfcl(home: Path, bfcl: Path) -> Path:
    """``home``'s cache holding the fetched files (what a fetch there would write)."""
    target = data_dir("bfcl", home / ".cache")
    if not target.exists():
        shutil.copytree(bfcl, target)
    return home


def test_bfcl_is_fetched_pinned_licensed_and_recorded(bfcl):
    wheel = CATALOG["bfcl"].wheel
    provenance = json.loads((bfcl / "provenance.json").read_text())
    assert provenance["requirement"] == "bfcl-eval==2026.3.23"
    assert provenance["wheel_sha256"] == wheel.wheel_sha256
    for name, sha in provenance["files"].items():
        assert file_sha256(bfcl / name) == sha, name
    assert sorted(provenance["files"]) == [
        "BFCL_v4_live_simple.json", "BFCL_v4_simple_python.json",
        "possible_answer/BFCL_v4_live_simple.json", "possible_answer/BFCL_v4_simple_python.json",
    ]  # fmt: skip
    assert (bfcl / "LICENSE").read_text().startswith("Apache-2.0\n")
    assert "declares the license: Apache 2.0." in (bfcl / "LICENSE").read_text()
    stamp = (bfcl / "provenance.json").stat().st_mtime_ns
    assert fetch("bfcl", PROJECT_CACHE) == bfcl
    assert (bfcl / "provenance.json").stat().st_mtime_ns == stamp, "found, not fetched again"


def test_both_sets_import_and_their_gold_answers_pass_bfcls_checker(bfcl):
    from gymflow.core.trajectory import assistant_items, prompt_items

    env = get_env("tool_call")
    failed = {}
    for name, n, prefix in (("bfcl:simple_python", 400, "simple_python_"),
                            ("bfcl:live_simple", 258, "live_simple_")):  # fmt: skip
        tasks = set_tasks(env, name, PROJECT_CACHE)
        assert len(tasks) == n and all(t.task_id.startswith(prefix) for t in tasks)
        assert tasks[0].task_id == prefix + ("0" if name.endswith("python") else "0-0-0")
        assert {t.ground_truth["bfcl"]["category"] for t in tasks} == {prefix.rstrip("_")}
        for t in tasks:
            score = env.verify(t, prompt_items(t.prompt) + assistant_items(env.gold_text(t), 0))
            if not score.success:
                failed[t.task_id] = score.detail
    assert failed == BAD_GOLD


def test_gymflow_eval_takes_a_bfcl_split(bfcl, tmp_path):
    home = _home_with_bfcl(tmp_path / "home", bfcl)
    env = os.environ | {"GYMFLOW_HOME": str(home)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([GYMFLOW, "eval", "--no-mlflow", *args], env=env,
                              capture_output=True, text=True)  # fmt: skip

    out = tmp_path / "eval"
    done = run("--env", "tool_call", "--split", "bfcl:live_simple", "--limit", "6",
               "--policy", "scripted:tool_call", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = pl.read_parquet(out / "rollouts")
    assert rows["task_id"].to_list() == [t.task_id for t in set_tasks(
        get_env("tool_call"), "bfcl:live_simple", PROJECT_CACHE)[:6]]  # fmt: skip
    assert rows["success"].to_list() == [True] * 6, "gold answers, scored by BFCL's rules"
    unknown = run("--env", "tool_call", "--split", "bfcl:simple", "--policy", "scripted:tool_call")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "error: [bad_request] no external set 'bfcl:simple' "
        "(known: bfcl:simple_python, bfcl:live_simple)"
    ]
    wrong_env = run("--env", "math", "--split", "bfcl:simple_python", "--policy", "scripted:math")
    assert wrong_env.returncode == 2
    assert wrong_env.stderr.strip().splitlines() == [
        "error: [bad_request] bfcl:simple_python holds tool_call tasks, not math: evaluate it "
        "with --env tool_call"
    ]


def test_unknown_general_sets_are_refused_in_one_line_before_any_work():
    from gymflow.lifecycle.run_config import run_config

    with pytest.raises(GymflowError) as caught:
        run_config(overrides={"gate": {"general_sets": ["bfcl:live_simple", "bfcl:simple"]}})
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert str(caught.value) == (
        "[bad_config] gate.general_sets: no external set 'bfcl:simple' "
        "(known: bfcl:simple_python, bfcl:live_simple)"
    )
    assert LifecycleConfig().gate.general_sets == [], "the default run evaluates no BFCL"
    cfg = run_config(overrides={"gate": {"general_sets": list(SETS)}})
    assert cfg.gate.general_sets == ["bfcl:simple_python", "bfcl:live_simple"]


def test_the_gate_evaluates_bfcl_for_the_start_and_every_candidate(
    gym_home, planted, policies, bfcl, tmp_path
):
    from gymflow.lifecycle.run_context import open_run
    from gymflow.lifecycle.summary import _general, general_table_rows
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks

    _home_with_bfcl(gym_home, bfcl)
    cfg = LifecycleConfig(
        env="planted_silence", registered_model="gymflow-bfcl-guardrail-test",  # no champion
        n_tasks=200, heldout_frac=0.2, heldout_n=32,
        max_new_tokens=TOKENS,
        gate={"min_n": 8, "general_envs": [], "general_sets": ["bfcl:simple_python"],
              "general_sets_n": 12},
    )  # fmt: skip
    run = open_run(gym_home, tmp_path / "runs" / "bfcl-gate", cfg)
    data = generate_tasks.fn(run, cfg)
    report = heldout_gate.fn(
        run, cfg, data, Checkpoint(path=policies["chatty"]), Checkpoint(path=policies["silent"]),
        Checkpoint(path=policies["chatty"]),
    )  # fmt: skip
    name = "bfcl:simple_python"
    # the control fails its own gain check, and is evaluated on BFCL all the same (the run's
    # transfer figures); the start solves none of them, so the set cannot guard anything:
    # skipped as a guardrail, and said so
    assert report.general == {name: {"baseline": 0.0, "grpo": 0.0, "sft_control": 0.0}}
    assert report.general_n == {name: 12}
    assert report.general_deltas == {name: {}}
    assert report.general_checks[name]["skipped"].startswith("the start scores 0.000 (success)")
    first = [f"simple_python_{i}" for i in range(12)]
    # each policy's own episodes: chatty runs out of tokens, silence writes no call
    kinds = {"baseline": "truncated", "grpo": "no_tool_call", "sft_control": "truncated"}
    for label, kind in kinds.items():
        rows = pl.read_parquet(
            Path(run.run_dir) / "eval" / f"bfcl-simple_python-{label}" / "rollouts"
        )
        assert sorted(rows["task_id"].to_list()) == sorted(first), label
        assert rows["reward"].to_list() == [-1.0] * 12, "no call on a call task: BFCL's -1"
        assert set(rows["failure_kind"]) == {kind}, label
    gate = report.gate
    assert gate.compared_with == ["the start"] and report.champion is None
    assert gate.passed and gate.chosen == "grpo"
    assert f"general sets skipped: {name} (the start scores 0.000 (success) on 12 tasks" in (
        gate.reason
    )
    metrics = mlflow.get_run(report.stage.mlflow_run_id).data.metrics
    assert {k: v for k, v in metrics.items() if k.startswith("general/")} == {
        f"general/{name}/{label}_value": 0.0 for label in ("baseline", "grpo", "sft_control")
    }
    assert general_table_rows({"general": _general(report)}) == [
        [name, "12", "0.000", "0.000", "skipped: start at the floor", "0.000",
         "skipped: start at the floor"]
    ]  # fmt: skip


def test_a_significant_bfcl_loss_refuses_a_candidate_and_names_the_set(
    micro_tool_call_model, bfcl, tmp_path
):
    """Real episodes on real BFCL tasks: the gold replay (the start) against the untrained micro
    model (the candidate, given a significant gain on its own held-out set)."""
    from gymflow.env.resources_server import build_app
    from gymflow.eval.evaluation import evaluate_policy
    from gymflow.eval.evidence import paired
    from gymflow.eval.gate import Candidate, GateSettings, choose
    from gymflow.policy.spec import load_policy
    from gymflow.policy.transformers_backend import TransformersPolicy

    env = get_env("tool_call")
    tasks = set_tasks(env, "bfcl:live_simple", PROJECT_CACHE)[:10]
    app = build_app(env)
    start, _ = evaluate_policy(env, app, load_policy("scripted:tool_call", tasks), tasks)
    after, _ = evaluate_policy(env, app, TransformersPolicy.from_path(micro_tool_call_model), tasks,
                               max_new_tokens=16)  # fmt: skip
    settings = GateSettings()
    success = [float(r["success"]) for r in after], [float(r["success"]) for r in start]
    bfcl_delta = paired(*success, settings.alpha, mark=-settings.general_margin)
    assert bfcl_delta.delta == -1.0 and bfcl_delta.below
    summary = {"success": 0.9, "well_formed": 1.0, "unsafe_rate": 0.0, "p95_tokens": 10.0}
    gain = paired([1.0] * 40, [0.0] * 40, settings.alpha)
    candidate = Candidate(
        name="grpo", summary=summary, delta=gain, general={"bfcl:live_simple": bfcl_delta}
    )  # fmt: skip
    result = choose(summary | {"success": 0.4}, [candidate], settings)
    assert not result.passed
    reason = result.verdicts[0].reason
    assert reason.startswith("general capability on bfcl:live_simple: -1.000 (CS [-1.000, ")
    assert reason.endswith("n=10) against the start, below the start by more than the margin 0.05")
