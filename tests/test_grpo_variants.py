"""GRPO settings end to end: each TRL loss variant, GSPO, KL and LoRA train a few real steps.

Every run goes through ``run_grpo`` with our ``rollout_func`` (episodes against the counter
resources server in-process) on the embedded tiny model, then the saved policy is loaded with
``from_pretrained`` and compared with the start: it must load and its weights must have moved.

A random-init model never solves counter, so every group would have equal rewards, zero
advantage and a zero gradient: no variant could change a weight. The verifier here is counter's
with graded partial credit (the share of digits in the final answer), which a random policy
varies on; that makes "the weights changed" a real check of each loss path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from graded_counter import GradedCounter  # tests/ is on the path
from pydantic import ValidationError

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
from gymflow.train.grpo import GRPOSettings, LoraSettings, RolloutSource, run_grpo


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 64-wide model gains nothing from 2 threads on a shared CPU
    env = GradedCounter()
    cfg = TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=192, corpus_size=800)
    base = ensure_tiny_model(
        tmp_path_factory.mktemp("cache"), "counter", lambda: tokenizer_corpus(env, 800, 5), cfg
    )
    pool = build_tasks(env, 64, seed=3, heldout_frac=0.0, val_frac=0.0)
    yield env, build_app(env), pool, base
    torch.set_num_threads(threads)


def _settings(**kw) -> GRPOSettings:
    base = dict(
        max_steps=2, prompts_per_step=2, num_generations=4, max_new_tokens=12,
        learning_rate=1e-2, temperature=1.0, save_every=1000, time_budget_s=None,
        dynamic_sampling=False, demo_loss=None, task_sampling="uniform",
    )  # fmt: skip
    return GRPOSettings(**{**base, **kw})


def _train(setting, out: Path, settings: GRPOSettings, **kw) -> dict:
    env, app, pool, base = setting
    batches = []
    source = RolloutSource(
        env, app, pool, settings, on_batch=lambda eps, used, step: batches.append(eps)
    )
    result = run_grpo(base, out, source, settings, log_to_mlflow=False, **kw)
    result["batches"] = batches
    return result


def _moved(base: Path, final: Path) -> float:
    """Largest absolute weight change between two saved policies (both must load)."""
    from transformers import AutoModelForCausalLM

    a = AutoModelForCausalLM.from_pretrained(base).state_dict()
    b = AutoModelForCausalLM.from_pretrained(final).state_dict()
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


VARIANTS = {
    "grpo": {"loss": {"type": "grpo"}},
    "dr_grpo": {"loss": {"type": "dr_grpo", "scale_rewards": "none"}},
    "dapo": {"loss": {"type": "dapo"}},
    "bnpo": {"loss": {"type": "bnpo"}},
    "cispo": {"loss": {"type": "cispo"}},
    "gspo": {"loss": {"type": "grpo", "importance_sampling_level": "sequence"}},
    "grpo_kl": {"loss": {"type": "grpo", "beta": 0.04}},
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_loss_variant_trains_a_loadable_policy(setting, tmp_path, name):
    result = _train(setting, tmp_path, _settings(**VARIANTS[name]))
    assert result["steps"] == 2
    rewards = {e.reward for batch in result["batches"] for e in batch}
    assert len(rewards) > 1, "graded rewards must vary, or no loss has a gradient"
    assert _moved(setting[3], Path(result["path"])) > 0.0
    logged = [h for h in result["log_history"] if "loss" in h]
    assert len(logged) == 2


def test_lora_saves_a_merged_policy_that_loads(setting, tmp_path):
    settings = _settings(lora=LoraSettings(r=4, alpha=8), learning_rate=5e-2)
    result = _train(setting, tmp_path, settings)
    final = Path(result["path"])
    assert not (final / "adapter_config.json").exists()  # merged, not an adapter folder
    assert _moved(setting[3], final) > 0.0
    from safetensors import safe_open

    with safe_open(str(final / "model.safetensors"), "pt") as f:
        names = list(f.keys())  # noqa: SIM118 (safe_open is not iterable)
    assert names and not [k for k in names if "lora" in k]


@pytest.mark.parametrize("name", ["dapo", "grpo_kl", "lora"])
def test_shared_prompts_train_like_trls_forward(setting, tmp_path, name):
    """``share_prompts`` (on by default) changes the compute, not the update: the same steps
    with TRL's own loss forward log the same losses and gradient norms and end at the same
    weights (KL's reference pass and LoRA too). Adam's step is ~lr × sign(gradient), so an
    element whose gradient is float noise (~1e-9) can move by a different amount in the two
    runs: the weights are compared element by element, allowing a few in 10,000 to differ."""
    from transformers import AutoModelForCausalLM

    variant = {"lora": LoraSettings(r=4, alpha=8)} if name == "lora" else VARIANTS[name]
    runs, weights = {}, {}
    for share in (True, False):
        runs[share] = _train(
            setting, tmp_path / str(share), _settings(share_prompts=share, **variant)
        )
        weights[share] = AutoModelForCausalLM.from_pretrained(runs[share]["path"]).state_dict()
    assert _moved(setting[3], Path(runs[True]["path"])) > 1e-3
    for key in ("loss", "grad_norm"):
        logged = {share: [h[key] for h in runs[share]["log_history"] if key in h] for share in runs}
        assert len(logged[True]) == 2
        torch.testing.assert_close(logged[True], logged[False], atol=1e-7, rtol=1e-4)
    apart = torch.cat(
        [(weights[True][k] - weights[False][k]).abs().flatten() for k in weights[False]]
    )
    assert float((apart > 1e-5).float().mean()) < 5e-4, float((apart > 1e-5).float().mean())


@pytest.mark.parametrize("schedule", ["constant", "cosine", "linear"])
def test_lr_schedule_reaches_the_optimizer(setting, tmp_path, schedule):
    """No time budget here, so the steps set the progress: the rate reaches 0 at max_steps."""
    result = _train(setting, tmp_path, _settings(max_steps=4, lr_schedule=schedule))
    rates = [h["learning_rate"] for h in result["log_history"] if "learning_rate" in h]
    assert len(rates) == 4 and max(rates) <= 1e-2
    if schedule == "constant":
        assert rates == [1e-2] * 4
    else:
        assert rates[0] == 1e-2  # step 1 trains at the peak, step 4 at a quarter of it or less
        assert rates[0] > rates[1] > rates[2] > rates[3] > 0.0 and rates[3] <= 0.26e-2


def test_warmup_ramps_the_rate_up_to_the_schedule(setting, tmp_path):
    """Two warm-up steps under a constant schedule: half the peak, then the peak."""
    result = _train(
        setting, tmp_path, _settings(max_steps=3, lr_schedule="constant", warmup_steps=2)
    )
    rates = [h["learning_rate"] for h in result["log_history"] if "learning_rate" in h]
    assert rates == pytest.approx([0.5e-2, 1e-2, 1e-2])


def test_each_batch_of_rollouts_trains_num_iterations_updates(setting, tmp_path):
    """mu = 2: four updates on two batches of episodes, the second update of each on the batch
    the first sampled (TRL's buffer); the policy moves on both."""
    result = _train(setting, tmp_path, _settings(max_steps=4, num_iterations=2))
    assert result["steps"] == 4
    assert len(result["batches"]) == 2
    losses = [h["loss"] for h in result["log_history"] if "loss" in h]
    assert len(losses) == 4
    assert _moved(setting[3], Path(result["path"])) > 0.0


def test_checkpoint_resume_continues_the_step_count(setting, tmp_path):
    first = _train(setting, tmp_path, _settings(max_steps=2, save_every=1))
    assert first["resumed_from"] is None
    second = _train(setting, tmp_path, _settings(max_steps=3, save_every=1))
    assert second["resumed_from"].endswith("checkpoint-2")
    assert second["steps"] == 3 and len(second["batches"]) == 1  # only the new step rolled out


def test_trl_metrics_reach_the_active_mlflow_run(setting, tmp_path, gym_home):
    import mlflow

    env, app, pool, base = setting
    settings = _settings(max_steps=1)
    source = RolloutSource(env, app, pool, settings)
    with mlflow.start_run() as run:
        run_grpo(base, tmp_path, source, settings, log_to_mlflow=True)
    metrics = mlflow.get_run(run.info.run_id).data.metrics
    assert {"loss", "reward", "grad_norm"} <= metrics.keys(), sorted(metrics)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"loss": {"type": "ppo"}}, "loss.type"),
        ({"loss": {"importance_sampling_level": "batch"}}, "loss.importance_sampling_level"),
        ({"loss": {"scale_rewards": "std"}}, "loss.scale_rewards"),
        ({"loss": {"beta": -0.1}}, "loss.beta"),
        ({"loss": {"typ": "dapo"}}, "loss.typ"),
        ({"lora": {"r": 0}}, "lora.r"),
        ({"lora": {"rank": 8}}, "lora.rank"),
        ({"loss_type": "grpo"}, 'moved into grpo.loss; write "loss": {"type": "grpo"}'),
    ],
)
def test_invalid_settings_are_refused_up_front(bad, named):
    with pytest.raises(ValidationError) as err:
        GRPOSettings(**bad)
    assert named in str(err.value)


def test_the_modules_examples_hold():
    """``stopped_by`` and ``completions_trained`` (the run summary's figures) as documented."""
    import doctest

    from gymflow.train import grpo

    assert doctest.testmod(grpo).attempted >= 4 and doctest.testmod(grpo).failed == 0
