"""The worked examples: a LangGraph agent and an OpenAI Agents SDK agent, unmodified, against the
capturing proxy on the tool_call environment; their episodes become valid rollout rows.

With the environment's gold answers served as the policy, both agents make the right call (run
through the proxy's tool endpoint, so the environment sees it) and score 1.0; with the embedded
micro model served, a row's token view re-scores to the logprobs the backend sampled with.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from gymflow.agent.backend import Backend
from gymflow.agent.external import ExternalAgents, load_program
from gymflow.agent.proxy import build_proxy_app
from gymflow.agent.proxy_store import ProxyStore
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.loopback import LoopbackServer
from gymflow.env.registry import get_env
from gymflow.policy.openai_server import build_openai_app
from gymflow.policy.spec import load_policy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import plan, read_rollouts

PROGRAMS = [
    "examples/agents/langgraph_agent.py:run",
    "examples/agents/openai_agents_sdk_agent.py:run",
]


def _collect(policy, tasks, out, repeats: int, **served) -> list:
    """Every task ``repeats`` times, the programs taking turns; rows to ``out``."""
    done = []
    with LoopbackServer(build_openai_app(policy, "policy", **served)) as backend:
        store = ProxyStore(out, "examples", "served")
        with LoopbackServer(build_proxy_app(Backend(f"{backend.url}/v1"), store=store)) as proxy:
            agents = ExternalAgents(PROGRAMS, proxy.url, concurrency=4)
            try:
                asyncio.run(
                    agents(plan(tasks, "examples", 0, repeats, 0), lambda *r: done.append(r))
                )
            finally:
                agents.close()
    assert agents.crashes == {}, agents.crashes
    return done


def test_both_agents_run_unmodified_and_score_the_gold_call(tmp_path):
    env = get_env("tool_call")
    by_prompt = {t.prompt[0]["content"]: t for t in build_tasks(env, 60, 9, 0.0, 0.0)}
    tasks = list(by_prompt.values())[:4]
    gold = load_policy("scripted:tool_call", tasks=tasks)
    done = _collect(gold, tasks, tmp_path, repeats=2)
    assert len(done) == 8 and all(err is None for _, _, err in done)
    rows = read_rollouts(tmp_path)  # validated against the rollouts schema on read
    assert rows.height == 8
    assert rows["reward"].to_list() == [1.0] * 8
    for row in rows.iter_rows(named=True):
        items = json.loads(row["trajectory"])
        kinds = [i["type"] for i in items]
        assert kinds == ["message", "function_call", "function_call_output"], kinds
        assert items[1]["call_id"] == items[2]["call_id"]  # the output answers the call
        assert row["turns"] == 1 and row["tool_calls"] == 1
        assert row["env_mask"] == [1] * len(row["completion_ids"]) and row["prompt_ids"]


def test_a_proxied_episode_rescores_to_the_sampled_logprobs(micro_tool_call_model, tmp_path):
    import torch

    env = get_env("tool_call")
    tasks = build_tasks(env, 40, seed=5, heldout_frac=0.0, val_frac=0.0)[:2]
    policy = TransformersPolicy.from_path(micro_tool_call_model)
    _collect(policy, tasks, tmp_path, repeats=2)
    rows = read_rollouts(tmp_path)
    assert rows.height == 4
    by_id = {t.task_id: t for t in tasks}
    for row in rows.iter_rows(named=True):
        task = by_id[row["task_id"]]
        assert row["prompt_ids"] == policy.encode_prompt(task.prompt, task.tools)
        ids = row["prompt_ids"] + row["completion_ids"]
        with torch.no_grad():
            logits = policy.model(input_ids=torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)  # both agents sample at temperature 1
        start = len(row["prompt_ids"])
        rescored = [
            logp[start + i - 1, tok].item()
            for i, (tok, mask) in enumerate(
                zip(row["completion_ids"], row["env_mask"], strict=True)
            )
            if mask
        ]
        sampled = [lp for lp, m in zip(row["logprobs"], row["env_mask"], strict=True) if m]
        assert len(rescored) == len(sampled) > 0
        assert max(abs(a - b) for a, b in zip(rescored, sampled, strict=True)) < 1e-4


def test_a_bad_entry_point_is_one_clear_line():
    for ref, words in [
        ("examples/agents/no_such_agent.py:run", "no file"),
        ("examples/agents/langgraph_agent.py:nope", "has no attribute"),
        ("just_a_name", "FILE.py:FUNCTION"),
    ]:
        with pytest.raises(GymflowError) as exc:
            load_program(ref)
        assert exc.value.kind is FailureKind.BAD_CONFIG and words in exc.value.detail
