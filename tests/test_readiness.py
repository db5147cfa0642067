"""GRPO's RL-readiness preflight (gymflow.train.readiness): the figures, the verdict, and the
refusal of a start outside the learnable band — one that solves everything and one that solves
nothing — through the real tool_call server, with scripted policies and a real untrained model.
"""

from __future__ import annotations

import itertools

import pytest
from leveled_tasks import leveled_task

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.train.curriculum import CurriculumSettings
from gymflow.train.readiness import (
    PreflightSettings,
    assess,
    enforce,
    preflight,
    sample_tasks,
    zero_variance_chance,
)

REFUSE = PreflightSettings(tasks=8, on_outside="refuse")


@pytest.fixture(scope="module")
def tool_call():
    env = get_env("tool_call")
    tasks = build_tasks(env, 60, 3, 0.0, 0.0)
    return env, build_app(env), tasks


def _script(env, tasks, wrong_every: int | None = None) -> ScriptedPolicy:
    """The gold call of each task; with ``wrong_every``, every that-many-th answer to a task
    carries an unknown argument instead (so a task's samples disagree)."""
    gold = {"\n".join(m["content"] for m in t.prompt): env.gold_text(t) for t in tasks}
    counters = {prompt: itertools.count() for prompt in gold}

    def respond(prompt: str, turn: int, observations: list[str]) -> str:
        if wrong_every is not None and next(counters[prompt]) % wrong_every == 0:
            return gold[prompt].replace('"arguments": {', '"arguments": {"x": 1, ', 1)
        return gold[prompt]

    return ScriptedPolicy(respond)


def _run(tool_call, policy, settings=REFUSE, max_new_tokens=1 << 20):
    """``max_new_tokens``: a scripted "token" is a byte, so scripts get all they need."""
    env, app, tasks = tool_call
    return preflight(
        {env.name: (env, app)}, policy, tasks, 4, 1.0, max_new_tokens, settings, seed=0
    )  # fmt: skip


def test_a_start_that_solves_everything_is_refused_with_its_figures(tool_call):
    env, _, tasks = tool_call
    ready = _run(tool_call, _script(env, tasks))
    assert ready.verdict == "too_easy" and ready.pass_at_1 == 1.0 and ready.pass_at_k == 1.0
    assert ready.zero_variance == 1.0 and ready.tasks == 8 and ready.samples == 4
    with pytest.raises(GymflowError) as refused:
        enforce(ready, REFUSE)
    assert refused.value.kind == FailureKind.START_NOT_LEARNABLE
    message = str(refused.value)
    assert "too easy" in message and "pass@1 1.00" in message and "pass@4 1.00" in message
    assert "zero-variance groups 100 %" in message and "8 training tasks x 4 samples" in message
    assert "\n" not in message


def test_a_start_that_solves_nothing_is_refused_with_its_figures(tool_call):
    ready = _run(tool_call, ScriptedPolicy.replay(["I would rather not."]))
    assert ready.verdict == "too_hard" and ready.pass_at_1 == 0.0 and ready.pass_at_k == 0.0
    assert ready.zero_variance == 1.0
    with pytest.raises(GymflowError) as refused:
        enforce(ready, REFUSE)
    assert "too hard" in str(refused.value) and "pass@1 0.00" in str(refused.value)


def test_an_untrained_model_solves_nothing_and_warn_only_says_so(tool_call, micro_tool_call_model):
    warn = PreflightSettings(tasks=4)
    ready = _run(tool_call, micro_tool_call_model, warn, 16)  # a checkpoint, loaded as GRPO would
    assert ready.verdict == "too_hard" and ready.pass_at_1 == 0.0
    enforce(ready, warn)  # "warn": the line is said, GRPO goes on


def test_a_start_whose_samples_disagree_is_inside_the_band(tool_call, tmp_path):
    env, _, tasks = tool_call
    out = tmp_path / "preflight.json"
    ready = preflight(
        {env.name: (env, build_app(env))}, _script(env, tasks, wrong_every=2), tasks, 4, 1.0,
        1 << 20, REFUSE, seed=0, out_file=out,
    )  # fmt: skip
    assert ready.verdict == "in_band" and ready.pass_at_1 == 0.5 and ready.zero_variance == 0.0
    enforce(ready, REFUSE)
    # a resumed stage reads the file instead of sampling again (this policy would fail)
    again = preflight({}, ScriptedPolicy.replay([""]), tasks, 4, 1.0, 8, REFUSE, 0, out)
    assert again == ready


def _rows(task: Task, rewards: list[float]) -> list[dict]:
    return [{"task_id": task.task_id, "success": r == 1.0, "reward": r} for r in rewards]


def test_zero_variance_counts_equal_rewards_not_only_equal_success():
    assert zero_variance_chance([0.8, 0.8, 0.8, 0.8], 4) == 1.0  # all failed alike
    assert zero_variance_chance([0.8, 0.6, 0.8, 0.8], 4) == 0.0  # failed, yet informative
    assert zero_variance_chance([1.0] * 6 + [0.0] * 2, 4) == pytest.approx(15 / 70)


def test_a_flat_start_inside_the_pass_band_is_outside_it():
    """Half the tasks always solved, half never: pass@1 0.5, yet no group teaches anything."""
    tasks = [leveled_task(i, None) for i in range(4)]
    rows = [r for i, t in enumerate(tasks) for r in _rows(t, [1.0 if i % 2 else -1.0] * 4)]
    ready = assess(rows, tasks, tasks, 4, 1.0, PreflightSettings())
    assert ready.verdict == "flat" and ready.pass_at_1 == 0.5 and ready.zero_variance == 1.0
    assert "difficulty" in ready.message


def test_levels_are_sampled_evenly_and_weighted_by_the_pool():
    pool = [leveled_task(i, 0) for i in range(30)] + [leveled_task(100 + i, 2) for i in range(10)]
    chosen = sample_tasks(pool, 6, seed=0)
    assert sorted(t.ground_truth["level"] for t in chosen) == [0, 0, 0, 2, 2, 2]
    assert sample_tasks(pool, 6, seed=0) == chosen  # seeded
    rows = []
    for t in chosen:  # level 0 always solved, level 2 solved by half the samples
        rows += _rows(t, [1.0] * 4 if t.ground_truth["level"] == 0 else [1.0, 1.0, 0.2, 0.2])
    ready = assess(rows, chosen, pool, 4, 1.0, PreflightSettings())
    assert ready.pass_at_1 == pytest.approx(0.75 * 1.0 + 0.25 * 0.5)  # the pool's 30:10
    assert ready.zero_variance == pytest.approx(0.75)
    assert ready.levels["0"].pool == 30 and ready.levels["2"].pass_at_1 == 0.5
    # the curriculum opens level 2 only: GRPO's expected zero-variance share there is 0
    assert ready.open_levels == [2] and ready.predicted_zero_variance == 0.0
    assert "level(s) 2" in ready.message
    off = assess(rows, chosen, pool, 4, 1.0, PreflightSettings(curriculum=None))
    assert off.open_levels is None and off.predicted_zero_variance == off.zero_variance
    kept = PreflightSettings(curriculum=CurriculumSettings(min_seen=2))
    assert assess(rows, chosen, pool, 4, 1.0, kept).open_levels == [2]


def test_a_band_out_of_order_is_refused():
    with pytest.raises(ValueError, match="band"):
        PreflightSettings(band=(0.9, 0.1))
