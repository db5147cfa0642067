"""GRPO's ``demo_loss`` trains on the demonstrations too: measured by their NLL after training.

Real parts: TRL's trainer with our rollout_func, a tiny transformers model, the counter
environment in-process, its gold demonstrations rendered as the SFT stage renders them. Two
runs from the same start with the same seed and rollouts settings, one with the demonstration
loss: only that one lowers the demonstrations' NLL, and the per-step draw is seeded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from gymflow.core.failures import GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.rollout.store import Lineage
from gymflow.train.demo_loss import DemoLoss, DemoLossSettings
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo
from gymflow.train.sft import demonstrations

SETTINGS = GRPOSettings(
    max_steps=6, prompts_per_step=2, num_generations=4, max_new_tokens=10, learning_rate=1e-2,
    temperature=1.0, save_every=10, time_budget_s=None, max_resample_rounds=0,
    validate_every=None, demo_loss=None, task_sampling="uniform",
)  # fmt: skip


def _demos(base: Path, env, tasks) -> list[dict]:
    return demonstrations(env, AutoTokenizer.from_pretrained(base), tasks)


def _nll(model_dir: Path, demos: list[dict]) -> float:
    import torch

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    every = DemoLoss(demos, tokenizer, DemoLossSettings(weight=1.0, batch_size=len(demos)), 0)
    with torch.no_grad():
        return float(sum(every.loss(model, step) for step in range(4)) / 4)


def _train(base: Path, out: Path, settings: GRPOSettings, demos) -> dict:
    import torch

    torch.set_num_threads(1)
    env = CounterEnvironment()
    tasks = build_tasks(env, 24, seed=3, heldout_frac=0.0, val_frac=0.0)
    lineage = Lineage("demo-loss", 0, 0, "grpo", env.name, env.version, "test")
    source = RolloutSource(env, build_app(env), tasks, settings, out, lineage)
    return run_grpo(base, out, source, settings, log_to_mlflow=False, demos=demos)


def test_demo_loss_lowers_the_demonstrations_nll(counter_model, tmp_path):
    env = CounterEnvironment()
    demos = _demos(counter_model, env, build_tasks(env, 12, seed=9, heldout_frac=0.0, val_frac=0.0))
    start = _nll(counter_model, demos)
    plain = _train(counter_model, tmp_path / "plain", SETTINGS, None)
    mixed_settings = SETTINGS.model_copy(
        update={"demo_loss": DemoLossSettings(weight=1.0, batch_size=8)}
    )
    mixed = _train(counter_model, tmp_path / "mixed", mixed_settings, demos)
    after_plain, after_mixed = _nll(Path(plain["path"]), demos), _nll(Path(mixed["path"]), demos)
    # imitation: the mixed run's demonstrations became much likelier, GRPO alone's did not
    assert after_mixed < 0.7 * start, (start, after_mixed)
    assert after_mixed < 0.7 * after_plain, (after_plain, after_mixed)


def test_demo_draws_are_seeded_by_step(counter_model):
    env = CounterEnvironment()
    demos = _demos(counter_model, env, build_tasks(env, 30, seed=1, heldout_frac=0.0, val_frac=0.0))
    tokenizer = AutoTokenizer.from_pretrained(counter_model)
    one = DemoLoss(demos, tokenizer, DemoLossSettings(batch_size=4), seed=5)
    two = DemoLoss(demos, tokenizer, DemoLossSettings(batch_size=4), seed=5)
    assert one.batch(3) == two.batch(3)  # a resumed run draws what the first one drew
    assert [one.batch(s) for s in range(5)] != [one.batch(3)] * 5


def test_demo_loss_without_demonstrations_is_refused(counter_model, tmp_path):
    settings = SETTINGS.model_copy(update={"demo_loss": DemoLossSettings()})
    with pytest.raises(GymflowError, match="demo_loss needs demonstrations"):
        _train(counter_model, tmp_path / "none", settings, None)
