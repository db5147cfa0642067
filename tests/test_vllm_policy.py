"""The in-process vllm backend: a clear kinded error where vLLM or a GPU is missing (here), the
mapping of vLLM's outputs, and, where vLLM and CUDA exist, real generation and a scored episode.
The engine-process backend (vLLM's CPU build) runs for real in tests/test_vllm_engine.py."""

from __future__ import annotations

import asyncio
import importlib.util
from types import SimpleNamespace

import pytest
import torch

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.policy.spec import load_policy
from gymflow.policy.tiny_model import (
    TinyModelConfig,
    build_tokenizer,
    ensure_tiny_model,
    tokenizer_corpus,
)
from gymflow.policy.vllm_backend import sampling_kwargs, to_generation
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling

ENV = CounterEnvironment()
HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_GPU = HAS_VLLM and torch.cuda.is_available()


@pytest.mark.skipif(HAS_GPU, reason="vLLM and a GPU are here: the backend loads")
def test_vllm_without_vllm_or_gpu_is_a_kinded_error(tmp_path, monkeypatch):
    # neither in-process vLLM nor a vLLM environment (tests/test_vllm_engine.py runs that one)
    monkeypatch.setenv("GYMFLOW_VLLM_ENV", str(tmp_path / "no-venv"))
    with pytest.raises(GymflowError) as err:
        load_policy(f"vllm:{tmp_path}")
    assert err.value.kind == FailureKind.BACKEND_UNAVAILABLE
    assert ("gymflow[gpu]" if not HAS_VLLM else "CUDA GPU") in str(err.value)
    assert "make setup-vllm" in str(err.value)


def test_sampling_params_sample_the_full_distribution_with_a_seed_each():
    assert sampling_kwargs(16, 0.7, False, 5) == {
        "n": 1,
        "max_tokens": 16,
        "temperature": 0.7,
        "seed": 5,
        "logprobs": 0,
        "skip_special_tokens": False,
    }
    assert sampling_kwargs(16, 0.7, True, None)["temperature"] == 0.0


def _step(**logprobs: float) -> dict:
    return {int(k[1:]): SimpleNamespace(logprob=v, rank=1) for k, v in logprobs.items()}


def test_vllm_outputs_map_to_generations():
    # Shaped like vllm.outputs.CompletionOutput: vLLM itself cannot run without a GPU.
    tok = build_tokenizer(tokenizer_corpus(ENV, 60, 1), 400)
    a, b = tok("<tool_call>7", add_special_tokens=False)["input_ids"][:2]
    eos = tok.eos_token_id
    steps = [_step(**{f"t{a}": -0.1}), _step(**{f"t{b}": -0.2, "t9": -3.0})]
    steps.append(_step(**{f"t{eos}": -0.3}))
    done = SimpleNamespace(token_ids=(a, b, eos), logprobs=steps, finish_reason="stop")
    gen = to_generation(done, tok)
    assert gen.token_ids == [a, b, eos] and gen.logprobs == [-0.1, -0.2, -0.3]
    assert gen.finished and gen.text == "<tool_call>7"  # special tokens kept, EOS not in text
    cut_off = SimpleNamespace(token_ids=(a, b), logprobs=steps[:2], finish_reason="length")
    cut = to_generation(cut_off, tok)
    assert not cut.finished and cut.token_ids == [a, b] and cut.text == "<tool_call>7"
    with pytest.raises(GymflowError):
        to_generation(SimpleNamespace(token_ids=(a,), logprobs=None, finish_reason="stop"), tok)


@pytest.mark.skipif(not HAS_GPU, reason="needs vLLM (pip install 'gymflow[gpu]') and a CUDA GPU")
def test_vllm_generates_and_plays_an_episode(tmp_path_factory):
    cfg = TinyModelConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=256)
    path = ensure_tiny_model(
        tmp_path_factory.mktemp("cache"),
        "counter",
        lambda: tokenizer_corpus(ENV, cfg.corpus_size, 5),
        cfg,
    )
    from gymflow.policy.transformers_backend import TransformersPolicy
    from gymflow.policy.vllm_backend import VLLMPolicy

    policy = VLLMPolicy.from_path(path, gpu_memory_utilization=0.2, max_model_len=384)
    tasks = build_tasks(ENV, 4, seed=2, heldout_frac=0.0, val_frac=0.0)
    reference = TransformersPolicy.from_path(path)
    ids = policy.encode_prompt(tasks[0].prompt, tasks[0].tools)
    assert ids == reference.encode_prompt(tasks[0].prompt, tasks[0].tools)
    gens = policy.generate([ids] * 4, 16, seed=1)
    again = policy.generate([ids] * 4, 16, seed=1)
    assert [g.token_ids for g in gens] == [g.token_ids for g in again]  # seeded per prompt
    for g in gens:
        assert len(g.token_ids) == len(g.logprobs) and all(lp <= 0.0 for lp in g.logprobs)

    async def go():
        async with EnvClient(app=build_app(ENV)) as client:
            return await run_episodes(client, ENV, policy, tasks, Sampling(), [0, 1, 2, 3])

    for ep in asyncio.run(go()):
        assert ep.turns >= 1 and isinstance(ep.reward, float)
        assert len(ep.completion_ids) == len(ep.logprobs) == len(ep.env_mask)
