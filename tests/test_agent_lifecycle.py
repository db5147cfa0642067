"""A lifecycle smoke run trained from proxied episodes registers a model.

``datasets/external-agent.json``'s agents (the LangGraph and OpenAI Agents SDK examples) make
every GRPO episode through the capturing proxy in front of the policy being trained, and the
baseline and held-out evaluations run on an agent server (``agent_servers``); the rest is the
smoke budget, cut further. Real parts: a Prefect engine, an MLflow store and registry, uvicorn
on 127.0.0.1 for the agent server, the proxy and the policy server, the embedded tiny model.

The programs are the examples behind a counting shim (``tests/agent_programs.py``), so the test
sees that they, not the in-process driver, made the episodes GRPO trained on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gymflow.agent.server import build_agent_app
from gymflow.env.loopback import LoopbackServer
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext
from gymflow.rollout.store import read_rollouts

ROOT = Path(__file__).resolve().parents[1]
SHIM = "tests/agent_programs.py"


@pytest.fixture(scope="module")
def proxied_run(gym_home, prefect_engine, tmp_path_factory):
    from gymflow.flows.lifecycle import lifecycle
    from gymflow.lifecycle.tracking import parent_run_id

    dataset = json.loads((ROOT / "datasets" / "external-agent.json").read_text())
    programs = dataset["grpo"]["rollout"]["programs"]
    assert programs == [
        "examples/agents/langgraph_agent.py:run",
        "examples/agents/openai_agents_sdk_agent.py:run",
    ]
    shimmed = [f"{SHIM}:{Path(p.split(':')[0]).stem}" for p in programs]
    run_id = "agents-smoke"
    run_dir = tmp_path_factory.mktemp("runs") / run_id
    ctx = RunContext(
        run_id=run_id, run_dir=str(run_dir), home=str(gym_home),
        mlflow_parent_id=parent_run_id(run_id),
    )  # fmt: skip
    with LoopbackServer(build_agent_app()) as agent_server:
        cfg = LifecycleConfig.smoke().overridden(
            {
                "registered_model": "gymflow-agents-smoke",
                "n_tasks": 400, "demos": 32, "profile_samples": 20, "val_eval_n": 8,
                "heldout_n": 16, "controls": [], "agent_servers": [agent_server.url],
                "sft": {"max_steps": 8, "eval_every": 8},
                "grpo": {
                    "max_steps": 2, "prompts_per_step": 2, "num_generations": 2,
                    "validate_every": None,
                    "rollout": {**dataset["grpo"]["rollout"], "programs": shimmed},
                },
                "gate": {"general_envs": []},
            }
        )  # fmt: skip
        summary = lifecycle(ctx, cfg)
        evaluated = agent_server.app.state.episodes
    return run_dir, cfg, summary, evaluated


def test_grpo_trained_on_the_agents_episodes(proxied_run):
    run_dir, cfg, _, _ = proxied_run
    calls = sys.modules["gymflow_agent_agent_programs"].CALLS
    rows = read_rollouts(run_dir)  # GRPO's rollouts, validated
    steps = cfg.grpo.max_steps
    assert rows.height >= steps * cfg.grpo.prompts_per_step * cfg.grpo.num_generations
    assert sum(calls.values()) == rows.height  # every GRPO episode was an agent program's
    assert calls["langgraph_agent"] > 0 and calls["openai_agents_sdk_agent"] > 0
    trained = rows.filter(rows["used_for_training"])
    assert trained.height > 0
    for row in trained.iter_rows(named=True):  # token views captured from the backend
        assert row["prompt_ids"] and row["completion_ids"] and 1 in row["env_mask"]
        assert len(row["logprobs"]) == len(row["completion_ids"])


def test_evaluations_ran_on_the_agent_server_and_a_model_is_registered(proxied_run, gym_home):
    from mlflow import MlflowClient

    run_dir, cfg, summary, evaluated = proxied_run
    # every evaluation episode (baseline on val, held-out for the start and the candidate) ran
    # on the agent server, and each is in its evaluation's rollout folder
    folders = [f for f in (run_dir / "eval").iterdir() if (f / "rollouts").is_dir()]
    assert {f.name for f in folders} >= {"val-current", "heldout-baseline", "heldout-candidate"}
    assert evaluated == sum(read_rollouts(f).height for f in folders) > 0
    versions = MlflowClient().search_model_versions(f"name = '{cfg.model_name}'")
    assert versions, "promote registered no version"
    assert any(v.tags.get("gymflow.run_id") == "agents-smoke" for v in versions), [
        v.tags for v in versions
    ]
    assert (run_dir / "summary.json").is_file()
