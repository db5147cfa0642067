"""Which validation tasks the checkpoint rule and SFT's sampled check score
(:func:`gymflow.lifecycle.training_inputs.validation_tasks`): real generated tasks of two
environments, a mix's shares."""

from __future__ import annotations

from gymflow.data.task_set import build_tasks
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.training_inputs import validation_tasks
from gymflow.train.grpo import GRPOSettings

VAL = [t.model_copy(update={"env": env}) for env in ("tool_call", "counter")
       for t in build_tasks(CounterEnvironment(), 60, 0, 0.0, 0.0)]  # fmt: skip


def _ids(chosen: dict) -> dict[str, list[str]]:
    return {env: [t.task_id for t in tasks] for env, tasks in chosen.items()}


def test_the_rule_scores_val_eval_n_unless_told_and_sampled_stays_on_val_eval_n():
    mix = {"envs": {"tool_call": 0.75, "counter": 0.25}, "val_eval_n": 8}
    first = {env: [t.task_id for t in VAL if t.env == env] for env in ("tool_call", "counter")}
    cfg = LifecycleConfig(**mix)
    both = _ids(validation_tasks(cfg, VAL, greedy=True))
    assert both == _ids(validation_tasks(cfg, VAL, greedy=False))
    assert both == {"tool_call": first["tool_call"][:6], "counter": first["counter"][:2]}  # the first 8, shared by weight

    told = LifecycleConfig(**mix, grpo=GRPOSettings(validate_tasks=20))
    assert _ids(validation_tasks(told, VAL, greedy=True)) == {
        "tool_call": first["tool_call"][:15], "counter": first["counter"][:5]
    }  # fmt: skip
    assert _ids(validation_tasks(told, VAL, greedy=False)) == both  # SFT's check: unchanged

    every = LifecycleConfig(**mix, grpo=GRPOSettings(validate_tasks=10_000))
    assert _ids(validation_tasks(every, VAL, greedy=True)) == first  # more than the split: all
    assert len(first["tool_call"]) == len(first["counter"]) > 15
