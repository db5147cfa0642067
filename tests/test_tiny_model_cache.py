"""The embedded model's cache: two runs sharing a home may build the same model at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from gymflow.env.registry import get_env
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus


def test_concurrent_builds_of_one_model_both_succeed(tmp_path):
    from transformers import AutoModelForCausalLM

    env = get_env("tool_call")
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64, corpus_size=300)
    with ThreadPoolExecutor(2) as pool:
        builds = [
            pool.submit(
                ensure_tiny_model, tmp_path, "tool_call", lambda: tokenizer_corpus(env, 300, 5), cfg
            )
            for _ in range(2)
        ]
        paths = [b.result() for b in builds]
    assert paths[0] == paths[1]
    assert AutoModelForCausalLM.from_pretrained(paths[0]).config.hidden_size == 32
    leftovers = [p.name for p in (tmp_path / "models").iterdir() if ".tmp" in p.name]
    assert leftovers == []
