"""The decode loop's preallocated KV cache (``gymflow.policy.decode_cache``).

Real parts: the tool_call environment's embedded Llama (untrained, weights drawn wide so a
misplaced cache slot would show) and a tiny Mistral with a sliding window built from a config,
both with the embedded tokenizer. ``tests/test_prefill_prefix.py`` checks the whole
generation against the model itself (greedy tokens against transformers' ``generate`` on both
models, sampled log-probs against a plain forward); here: which cache each model decodes with,
and that the preallocated one samples what the growing one does.
"""

from __future__ import annotations

import torch
from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.decode_cache import with_room
from gymflow.policy.transformers_backend import TransformersPolicy


def _prompts(policy: TransformersPolicy, n: int = 6) -> list[list[int]]:
    tasks = build_tasks(get_env("tool_call"), n, seed=3, heldout_frac=0.0, val_frac=0.0)
    return [policy.encode_prompt(t.prompt, t.tools) for t in tasks]


def _wide(model) -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)


def _prefilled(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=True).past_key_values


def test_a_llama_cache_gets_room_and_its_prefix_rows_as_picked(micro_tool_call_model):
    policy = TransformersPolicy.from_path(micro_tool_call_model)
    ids = torch.tensor([_prompts(policy, 1)[0]] * 2)
    ids[1, -3:] = 5  # two different rows
    past = _prefilled(policy.model, ids)
    keys = [layer.keys.clone() for layer in past.layers]
    rows = torch.tensor([1, 0, 1])
    cache, width = with_room(policy.model, past, rows, 7)
    assert type(cache).__name__ == "StaticCache"
    assert width == ids.shape[1] + 7
    for layer, before in zip(cache.layers, keys, strict=True):
        assert layer.keys.shape[0] == 3 and layer.keys.shape[2] == width
        torch.testing.assert_close(layer.keys[:, :, : ids.shape[1]], before[rows], rtol=0, atol=0)
        assert not layer.keys[:, :, ids.shape[1] :].any()  # the room, unwritten


def test_sampled_tokens_are_the_growing_caches(micro_tool_call_model, monkeypatch):
    """The same seeds sample the same tokens and log-probs with the room and without it."""
    policy = TransformersPolicy.from_path(micro_tool_call_model)
    _wide(policy.model)
    prompts = _prompts(policy)
    prompts = [p for p in prompts for _ in range(3)]  # groups: rows picked from the prefill
    seeds = list(range(len(prompts)))
    roomy = policy.generate(prompts, max_new_tokens=16, temperature=1.0, seed=seeds)
    monkeypatch.setattr(
        "gymflow.policy.transformers_backend.with_room",
        lambda model, past, rows, room: (_pick(past, rows), None),
    )
    growing = policy.generate(prompts, max_new_tokens=16, temperature=1.0, seed=seeds)
    assert [g.token_ids for g in roomy] == [g.token_ids for g in growing]
    for a, b in zip(roomy, growing, strict=True):
        torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=1e-5)


def _pick(past, rows):
    if rows is not None:
        past.batch_select_indices(rows)
    return past


def test_a_sliding_window_cache_is_left_to_transformers(micro_tool_call_model):
    """(``tests/test_prefill_prefix.py`` checks that such a model generates what transformers'
    own ``generate`` does.)"""
    tokenizer = AutoTokenizer.from_pretrained(micro_tool_call_model)
    config = MistralConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, sliding_window=4096,
    )  # fmt: skip
    model = MistralForCausalLM(config).eval()
    policy = TransformersPolicy(model, tokenizer)
    past = _prefilled(model, torch.tensor([_prompts(policy, 1)[0]]))
    assert any(type(layer).__name__ != "DynamicLayer" for layer in past.layers)
    same, width = with_room(model, past, None, 8)
    assert same is past and width is None
