"""GRPO with rollouts from a real vLLM engine process (``rollout: {"engine": "vllm"}``, vLLM's CPU build).

Real steps through ``run_grpo``; before every rollout batch the engine gets the trainer's
weights (full weights, or the LoRA adapter through vLLM's runtime LoRA loading). The proof:
at every step, the logprobs the engine gives a fixed prompt's sampled tokens equal the
trainer's model's own within 1e-3 nats, and at the one step whose sync the test skips they do
not (the learning rate is large enough that one step moves them by far more).

A random model never solves counter, so every group would score the same and no weight would
move; the verifier here scores the length of what the model wrote, which varies from the
first step on, so every step moves the weights.
"""

from __future__ import annotations

import pytest
from transformers import TrainerCallback
from vllm_model import needs_vllm, teacher_forced_logprobs, vllm_tiny_model

from gymflow.core.scoring import Score
from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.train.grpo import GRPOSettings, LoraSettings, RolloutSource, run_grpo

pytestmark = needs_vllm
SKIPPED_SYNC = 1
"""The step whose weight sync the test leaves out."""


class LengthScored(CounterEnvironment):
    """counter, rewarded by how much the model wrote (up to 40 characters): varies at random."""

    def verify(self, task, items) -> Score:
        said = [
            it.get("content") or it.get("arguments") or ""
            for it in items
            if it.get("role") == "assistant" or it.get("type") == "function_call"
        ]
        share = min(sum(len(str(c)) for c in said), 40) / 40
        return Score(share, False, None, {"written": share}, "length-scored for tests")


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    env = LengthScored()
    base = vllm_tiny_model(tmp_path_factory.mktemp("vllm-grpo"), "counter")
    pool = build_tasks(env, 32, seed=3, heldout_frac=0.0, val_frac=0.0)
    return env, pool, base


class Watch(TrainerCallback):
    """Holds the trainer's model and the step being generated for."""

    model = None
    step = 0

    def on_train_begin(self, args, state, control, model=None, **kw):
        self.model = model

    def on_step_begin(self, args, state, control, **kw):
        self.step = state.global_step


def run(setting, tmp_path, **kw) -> tuple[dict, dict[int, float]]:
    """Three GRPO steps on the managed engine; per step, the engine-vs-trainer logprob gap."""
    env, pool, base = setting
    settings = GRPOSettings(
        max_steps=3, prompts_per_step=2, num_generations=4, max_new_tokens=12,
        learning_rate=2e-2, temperature=1.0, save_every=1000, time_budget_s=None,
        dynamic_sampling=False, demo_loss=None, task_sampling="uniform", rollout={"engine": "vllm"}, **kw,
    )  # fmt: skip
    watch, gaps, rows = Watch(), {}, []

    def compare(episodes, used, step):
        rows.extend(episodes)
        served = source.backend.engine.served
        prompt = episodes[0].prompt_ids
        sample = served.generate([prompt], 12, temperature=1.0, seed=[7])[0]
        mine = teacher_forced_logprobs(watch.model, prompt, sample.token_ids)
        gaps[step] = max(abs(a - b) for a, b in zip(sample.logprobs, mine, strict=True))

    source = RolloutSource(env, build_app(env), pool, settings, out_dir=tmp_path, on_batch=compare)
    real_push = source.backend.engine.push

    def push(model):  # the sync of one step is left out
        if watch.step != SKIPPED_SYNC:
            real_push(model)

    source.backend.engine.push = push
    result = run_grpo(base, tmp_path, source, settings, log_to_mlflow=False, callbacks=[watch])
    assert result["steps"] == 3 and len(rows) == 3 * 8
    assert source.backend.engine.served is None  # the engine was stopped with the run
    assert all(len(e.logprobs) == len(e.completion_ids) > 0 for e in rows)
    return result, gaps


def test_grpo_rolls_out_on_vllm_with_the_trainers_weights_every_step(setting, tmp_path):
    _, gaps = run(setting, tmp_path)
    synced = {s: g for s, g in gaps.items() if s != SKIPPED_SYNC}
    assert max(synced.values()) < 1e-3, f"engine vs trainer after a sync: {synced}"
    assert gaps[SKIPPED_SYNC] > 1e-2, f"a skipped sync went unnoticed: {gaps}"


def test_grpo_lora_adapter_reaches_vllm_every_step(setting, tmp_path):
    _, gaps = run(setting, tmp_path, lora=LoraSettings(r=8, alpha=16))
    synced = {s: g for s, g in gaps.items() if s != SKIPPED_SYNC}
    assert max(synced.values()) < 1e-3, f"engine vs trainer after a sync: {synced}"
    assert gaps[SKIPPED_SYNC] > 1e-2, f"a skipped sync went unnoticed: {gaps}"
