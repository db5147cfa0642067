"""Shared fixtures: an isolated project home, MLflow store and Prefect engine per session, and a
micro embedded model."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

MIN_FREE_GIB = 3.0
"""Free disk the suite needs where pytest writes (run folders, models, stores, Parquet)."""


def pytest_sessionstart(session):
    """On a nearly full disk, stop before the first test with one line, instead of dozens of
    tests failing with ``No space left on device`` halfway through the suite."""
    where = Path(tempfile.gettempdir())
    free = shutil.disk_usage(where).free / 2**30
    if free < MIN_FREE_GIB:
        pytest.exit(
            f"[disk_full] {free:.1f} GiB free on {where}'s disk, the suite needs "
            f"{MIN_FREE_GIB:.0f}: free some space (or point TMPDIR at a larger disk) and run it "
            "again",
            returncode=2,
        )


@pytest.fixture(scope="session")
def gym_home(tmp_path_factory) -> Path:
    """A throwaway GYMFLOW_HOME with MLflow (sqlite) and Prefect settings pointed into it."""
    home = tmp_path_factory.mktemp("gymhome")
    os.environ["GYMFLOW_HOME"] = str(home)
    from gymflow.lifecycle.home import configure_prefect

    configure_prefect(home)
    from gymflow.lifecycle.tracking import configure

    configure(home)
    return home


@pytest.fixture(scope="session")
def prefect_engine(gym_home):
    """A real Prefect engine: temporary API server and database (prefect_test_harness)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings(
            {PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(gym_home / ".prefect" / "storage")}
        ),
    ):
        yield


@pytest.fixture(scope="session")
def micro_tool_call_model(tmp_path_factory) -> Path:
    """A real, untrained embedded model for ``tool_call`` (32 wide, 1 layer): seconds to build."""
    from gymflow.env.registry import get_env
    from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus

    env = get_env("tool_call")
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64, corpus_size=400)
    return ensure_tiny_model(
        tmp_path_factory.mktemp("cache"), "tool_call", lambda: tokenizer_corpus(env, 400, 5), cfg
    )


@pytest.fixture(scope="session")
def counter_model(tmp_path_factory) -> Path:
    """A real, untrained embedded model for ``counter`` (64 wide, 2 layers), the GRPO tests'
    start: read only, so one build serves every test."""
    from gymflow.environments.counter.environment import CounterEnvironment
    from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus

    env = CounterEnvironment()
    cfg = TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=192, corpus_size=800)
    return ensure_tiny_model(
        tmp_path_factory.mktemp("cache"), "counter", lambda: tokenizer_corpus(env, 800, 5), cfg
    )


HEAVY = {
    "environments/code/tests/test_code_env.py", "environments/code/tests/test_code_humaneval.py",
    "environments/code/tests/test_code_sandbox.py", "tests/test_agent_examples.py",
    "tests/test_agent_lifecycle.py", "tests/test_benchmarks.py", "tests/test_bfcl_guardrail.py",
    "tests/test_checkpoint_shapes.py", "tests/test_ddp.py", "tests/test_deploy.py",
    "tests/test_deploy_background.py", "tests/test_docs_tutorial.py", "tests/test_env_new.py",
    "tests/test_env_serve.py", "tests/test_env_server_killed.py", "tests/test_eval_openai.py",
    "tests/test_fuzz_servers.py", "tests/test_gate_champion.py",
    "tests/test_gate_checkpoint_rule.py", "tests/test_gate_control_always.py",
    "tests/test_gate_drift.py", "tests/test_gate_forgetting.py", "tests/test_gate_mix.py",
    "tests/test_gguf_checkpoint.py", "tests/test_grpo_kill_resume.py",
    "tests/test_grpo_variants.py", "tests/test_interrupt.py", "tests/test_launched_lifecycle.py",
    "tests/test_learning.py", "tests/test_lifecycle.py", "tests/test_lifecycle_arms.py",
    "tests/test_lifecycle_mix.py", "tests/test_load_smoke.py", "tests/test_profiling.py",
    "tests/test_ray_collect.py", "tests/test_ray_env_replicas.py", "tests/test_ray_grpo.py",
    "tests/test_ray_prefect.py", "tests/test_ray_verify.py", "tests/test_real_model_lifecycle.py",
    "tests/test_responses_items.py", "tests/test_rft.py", "tests/test_run_budget.py",
    "tests/test_run_killed.py", "tests/test_sessions_scale.py", "tests/test_shared_prefix.py",
    "tests/test_team_faults.py", "tests/test_team_stack.py", "tests/test_ui_browser.py",
    "tests/test_ui_servers.py", "tests/test_vllm_engine.py", "tests/test_vllm_eval.py",
    "tests/test_vllm_grpo.py", "tests/test_vllm_policy.py", "tests/test_vllm_weight_sync.py",
}  # fmt: skip
"""Test files of 10 s or more of a full run on two workers (whole lifecycles, servers, Ray,
trainers, browsers): marked ``slow`` here, so ``make test-fast`` (``-m "not slow"``) leaves
them out. ``make test`` runs everything. A new test file that takes long belongs here."""


def pytest_collection_modifyitems(config, items):
    root = Path(str(config.rootpath))
    for item in items:
        where = Path(str(item.path)).resolve()
        if where.is_relative_to(root) and str(where.relative_to(root)) in HEAVY:
            item.add_marker(pytest.mark.slow)
