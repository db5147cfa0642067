"""pass@k beside greedy pass@1 for an arm, through the real driver and tool_call's in-process
resources server.

A scripted policy answers each task's gold call on exactly ``c`` of its 8 sampled episodes (it
counts the calls per request, whatever order the driver runs them in) and a wrong call on the
rest, and greedily answers gold on the tasks with ``c >= 4``. The estimator's closed form
(Chen et al. 2021, ``1 - C(n - c, k) / C(n, k)``, checked against enumerating every draw in
``tests/test_eval_metrics.py``) then gives the expected figure for every k.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.arm_passk import heldout_pass_at_k
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.store import ROLLOUTS_DIR, read_parts

SUCCESSES = [0, 1, 2, 4, 8, 3, 0, 6]
"""Successes out of 8 samples of each task, in task order."""


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


class CountingPolicy(ScriptedPolicy):
    """Greedy: gold on the tasks with ``c >= 4``. Sampled: gold on the first ``c`` of each
    task's samples, a call with an extra argument (below full reward) on the rest."""

    def __init__(self, env, tasks) -> None:
        super().__init__(self.answer)
        self.env, self.greedy, self.calls = env, False, Counter()
        self.by_request = {
            t.prompt[0]["content"]: (t, c) for t, c in zip(tasks, SUCCESSES, strict=True)
        }

    def generate(self, prompts, max_new_tokens, temperature=1.0, greedy=False, seed=None):
        self.greedy = greedy
        return super().generate(prompts, max_new_tokens, temperature, greedy, seed)

    def answer(self, prompt: str, turn: int, observations: list[str]) -> str:
        task, c = self.by_request[prompt]
        if self.greedy:
            right = c >= 4
        else:
            self.calls[prompt] += 1
            right = self.calls[prompt] <= c
        gold = self.env.gold_text(task)
        return gold if right else gold.replace("}}</tool_call>", ', "force": true}}</tool_call>')


def test_pass_at_k_of_an_arm_matches_the_closed_form(tmp_path):
    env = get_env("tool_call")
    app = build_app(env)
    tasks = build_tasks(env, 40, seed=3, heldout_frac=1.0, val_frac=0.0)[: len(SUCCESSES)]
    policy = CountingPolicy(env, tasks)
    result = heldout_pass_at_k(env, app, policy, tasks, k=8, seed=5, out_dir=tmp_path)

    assert result.k == 8 and result.n_tasks == len(tasks)
    assert sorted(result.pass_at) == ["1", "2", "4", "8"]
    for k, figure in result.pass_at.items():
        expected = sum(closed_form(8, c, int(k)) for c in SUCCESSES) / len(SUCCESSES)
        assert figure["value"] == pytest.approx(expected, abs=1e-12), k
        assert figure["ci95"][0] <= figure["value"] <= figure["ci95"][1]
    # pass@1 is the mean success; pass@8 the share of tasks with any success
    assert result.pass_at["1"]["value"] == pytest.approx(sum(SUCCESSES) / 64)
    assert result.pass_at["8"]["value"] == pytest.approx(6 / 8)
    assert result.greedy["value"] == pytest.approx(3 / 8)  # the tasks with c >= 4
    assert list(result.greedy_by_task) == [t.task_id for t in tasks]
    assert list(result.greedy_by_task.values()) == [float(c >= 4) for c in SUCCESSES]
    lo, hi = result.greedy["ci95"]
    assert lo < 3 / 8 < hi
    assert "pass@8 0.750" in result.text() and "greedy pass@1 0.375" in result.text()

    rows = read_parts(
        tmp_path / ROLLOUTS_DIR
    )  # both evaluations stored: 8 greedy and 64 sampled episodes
    assert sorted(Counter(rows["iteration"].to_list()).items()) == [(0, 8), (1, 64)]
