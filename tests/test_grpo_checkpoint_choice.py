"""GRPO hands on its best validated step, not its last: read back from what the run leaves.

Real parts: TRL's trainer, our rollout_func, a tiny transformers model, the counter
environment in-process (graded by the share of digits, so scores move in small steps), and a
real evaluation through the one episode driver on validation tasks the run never trains on. The run is validated at step 0 (the start), every 2 steps and at its last; it is
stopped once mid-way
(before a checkpoint) and run again on the same folder, so the choice must also survive a
resume. The saved policy is then scored again from disk: it must score what the chosen
step scored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graded_counter import Crash, PassingCounter
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.store import Lineage
from gymflow.train.checkpoint_choice import VALIDATION_FILE, validation_callback
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo

SETTINGS = GRPOSettings(
    max_steps=8, prompts_per_step=2, num_generations=4, max_new_tokens=10, learning_rate=3e-2,
    temperature=1.0, save_every=3, time_budget_s=None, max_resample_rounds=1, validate_every=2,
    demo_loss=None, task_sampling="uniform",
)  # fmt: skip


def _score(env, app, val):
    """1 - mean reward on ``val``: training raises the reward, so an early step scores best
    here and the run has to go back to it. Sampled with fixed seeds, not greedy: the barely
    trained model's greedy answers all score 0 (the lifecycle's score is greedy success)."""

    def score(model, tokenizer) -> float:
        _, summary = evaluate_policy(
            env, app, TransformersPolicy(model, tokenizer), val, greedy=False, samples=4,
            temperature=1.0, max_new_tokens=10, seed=11,
        )  # fmt: skip
        return 1.0 - summary["reward"]

    return score


def _run(base: Path, out: Path, extra: list[TrainerCallback]) -> dict:
    import torch

    torch.set_num_threads(1)
    env = PassingCounter()
    app = build_app(env)
    tasks = build_tasks(env, 40, seed=5, heldout_frac=0.0, val_frac=0.0)
    pool, val = tasks[:28], tasks[28:]
    lineage = Lineage("choice", 0, 0, "grpo", env.name, env.version, "test")
    source = RolloutSource(env, app, pool, SETTINGS, out, lineage)
    choice = validation_callback(_score(env, app, val), SETTINGS.validate_every, False)
    return run_grpo(base, out, source, SETTINGS, log_to_mlflow=False, callbacks=[*extra, choice])


def test_the_saved_policy_is_the_best_validated_step(counter_model, tmp_path):
    out = tmp_path / "grpo"
    with pytest.raises(RuntimeError):
        _run(counter_model, out, [Crash(5)])  # after validating steps 2 and 4, before step 6
    result = _run(counter_model, out, [])
    assert Path(result["resumed_from"]).name in {"checkpoint-3", "checkpoint-4"}

    record = json.loads((out / VALIDATION_FILE).read_text())
    assert record == result["validation"]
    history = record["history"]
    assert [h["step"] for h in history] == [0, 2, 4, 6, 8]  # the start, every 2, the last
    scores = [h["success"] for h in history]
    assert len(set(scores)) > 1, scores  # the choice must have something to choose between
    best = max(range(len(scores)), key=lambda i: (scores[i], i))  # ties: the later step
    assert record["chosen_step"] == history[best]["step"]
    assert record["chosen_success"] == scores[best]

    # the policy the run leaves scores what its chosen step scored
    env = PassingCounter()
    tasks = build_tasks(env, 40, seed=5, heldout_frac=0.0, val_frac=0.0)
    final = Path(result["path"])
    model = AutoModelForCausalLM.from_pretrained(final)
    again = _score(env, build_app(env), tasks[28:])(model, AutoTokenizer.from_pretrained(final))
    assert record["chosen_step"] < 8  # an earlier step won: the run had to load it back
    if record["chosen_step"] == 0:  # the start won: the run hands the start's weights back
        start = AutoModelForCausalLM.from_pretrained(counter_model).state_dict()
        assert all((model.state_dict()[k] == v).all() for k, v in start.items()), (
            "the start's weights"
        )
    assert again == pytest.approx(scores[best])
    assert again != pytest.approx(scores[-1])  # not the last step's policy
