"""What the vLLM tests share: a tiny tool_call model vLLM's CPU kernels run, and the skip rule.

vLLM's CPU attention needs a head size of 32 or more, so the model is 64 wide with 2 heads (the
suite's micro model has 8-wide heads). ``make test`` builds the vLLM environment first
(``make setup-vllm``), so in CI these tests run; elsewhere they skip and say how to run them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gymflow.core.failures import GymflowError
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
from gymflow.policy.vllm_engine import vllm_python

VLLM_SHAPE = TinyModelConfig(
    hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128, corpus_size=400
)


def vllm_env_missing() -> str | None:
    """Why the vLLM tests cannot run here (None: they can)."""
    try:
        vllm_python()
    except GymflowError as exc:
        return exc.detail
    return None


needs_vllm = pytest.mark.skipif(
    vllm_env_missing() is not None, reason=f"{vllm_env_missing()} (make setup-vllm)"
)


def vllm_tiny_model(cache: Path, env_name: str = "tool_call") -> Path:
    from gymflow.env.registry import get_env

    env = get_env(env_name)
    return ensure_tiny_model(cache, env_name, lambda: tokenizer_corpus(env, 400, 5), VLLM_SHAPE)


def teacher_forced_logprobs(model, prompt: list[int], ids: list[int], temperature: float = 1.0):
    """The log-probability ``model`` gives each of ``ids`` after ``prompt`` (a float list)."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        return logp.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()
