"""The evaluation's valid-format rate for verifiers that report a ``format`` component
(tool_call) and for those that score outcomes only (workplace): a well-formed episode counts
as valid, a malformed one or one without any tool call does not, whichever way the verifier
says it."""

from __future__ import annotations

import pytest

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.policy.base import Generation
from gymflow.policy.scripted import ScriptedPolicy


class RamblingPolicy(ScriptedPolicy):
    """Prose that never ends: every turn runs into the token budget without a call."""

    def _one(self, ids: list[int]) -> Generation:
        text = "Let me think about what the user wants here and then"
        return Generation(list(text.encode()), [0.0] * len(text), text, False)


@pytest.mark.parametrize("env_name", ["tool_call", "workplace"])
def test_valid_format_rate_counts_well_formed_episodes(env_name):
    env = get_env(env_name)
    app = build_app(env)
    # Short gold episodes: a scripted turn's "tokens" are bytes, and the episode cap is in tokens.
    tasks = [t for t in build_tasks(env, 40, 1, 0.0, 0.0) if len(env.gold_turns(t)) <= 2][:6]
    script = {"\n".join(m["content"] for m in t.prompt): env.gold_turns(t) for t in tasks}

    def say_gold(prompt: str, turn: int, observations: list[str]) -> str:
        turns = script[prompt]
        return turns[min(turn, len(turns) - 1)]

    gold = ScriptedPolicy(say_gold)
    broken = ScriptedPolicy.replay(['<tool_call>{"name": "x", "arguments": </tool_call>'])
    rows, good = evaluate_policy(env, app, gold, tasks, max_new_tokens=1 << 20)
    assert good["success"] == 1.0 and good["well_formed"] == 1.0, rows
    rows, bad = evaluate_policy(env, app, broken, tasks, max_new_tokens=1 << 20)
    assert bad["well_formed"] == 0.0 and {r["failure_kind"] for r in rows} == {"invalid_json"}
    # a model that answers in prose and never calls a tool has not learned the format either
    silent = ScriptedPolicy.replay(["I have taken care of it."])
    rows, mute = evaluate_policy(env, app, silent, tasks, max_new_tokens=1 << 20)
    failed = [r for r in rows if not r["success"]]
    assert failed and {r["failure_kind"] for r in failed} == {"no_tool_call"}, rows
    assert mute["well_formed"] == sum(r["success"] for r in rows) / len(rows), mute
    # nor has one whose every answer the token budget cut before any call was written
    rows, cut = evaluate_policy(
        env, app, RamblingPolicy.replay([""]), tasks, max_new_tokens=1 << 20
    )
    failed = [r for r in rows if not r["success"]]
    assert failed and {r["failure_kind"] for r in failed} == {"truncated"}, rows
    assert cut["well_formed"] == sum(r["success"] for r in rows) / len(rows), cut
