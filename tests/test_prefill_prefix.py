"""Generation with the prompts' common prefix prefilled once samples what the model says.

Real parts: a tiny transformers Llama (the tool_call environment's embedded model, untrained)
and the tool_call environment's prompts rendered by its chat template — every prompt starts with the
same system turn and tool schema, prompts differ in length (left-padded behind that prefix).
Checked against the model itself, not against our code: greedy tokens equal transformers'
own ``generate`` run on each prompt alone (no padding, no shared prefix), and every sampled
token's log-prob equals a plain forward pass over its prompt and the tokens before it. The
greedy check also runs on a tiny sliding-window Mistral, whose cache decodes as transformers'
own (:mod:`gymflow.policy.decode_cache` preallocates plain growing caches only).
"""

from __future__ import annotations

import pytest
import torch

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.transformers_backend import MIN_PREFIX, TransformersPolicy, common_prefix


def _policy(model_dir) -> TransformersPolicy:
    """The model with weights drawn wide: an untrained init attends almost uniformly, so a
    wrong position or a misplaced cache row would barely show in its log-probs."""
    policy = TransformersPolicy.from_path(model_dir)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.normal_(0.0, 0.5)
    return policy


def _sliding_policy(model_dir) -> TransformersPolicy:
    """A tiny Mistral with a sliding window (the embedded tokenizer): its cache layers are not
    plain growing ones, so generation keeps transformers' cache (``decode_cache``)."""
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    config = MistralConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, sliding_window=4096,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    policy = TransformersPolicy(MistralForCausalLM(config).eval(), tokenizer)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.normal_(0.0, 0.5)
    return policy


POLICIES = {"llama": _policy, "sliding_window": _sliding_policy}


def _prompts(policy: TransformersPolicy) -> list[list[int]]:
    env = get_env("tool_call")
    tasks = build_tasks(env, 12, seed=2, heldout_frac=0.0, val_frac=0.0)
    prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks]
    # what the test is for: a common prefix worth sharing, rests of different lengths
    assert common_prefix([tuple(p) for p in prompts]) >= MIN_PREFIX
    assert len({len(p) for p in prompts}) > 1
    return prompts


@pytest.mark.parametrize("kind", sorted(POLICIES))
def test_greedy_tokens_are_transformers_own_on_each_prompt_alone(micro_tool_call_model, kind):
    policy = POLICIES[kind](micro_tool_call_model)
    prompts = _prompts(policy)
    gens = policy.generate(prompts, max_new_tokens=12, greedy=True)
    for prompt, gen in zip(prompts, gens, strict=True):
        alone = policy.model.generate(
            torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
            eos_token_id=policy.eos_id, pad_token_id=policy.pad_id,
        )[0, len(prompt) :].tolist()  # fmt: skip
        assert gen.token_ids == alone[: len(gen.token_ids)]


def test_sampled_log_probs_are_a_plain_forward_passes(micro_tool_call_model):
    policy = _policy(micro_tool_call_model)
    prompts = _prompts(policy)
    gens = policy.generate(prompts, max_new_tokens=10, temperature=1.0, seed=list(range(12)))
    with torch.no_grad():
        for prompt, gen in zip(prompts, gens, strict=True):
            ids = torch.tensor([prompt + gen.token_ids])
            logps = torch.log_softmax(policy.model(input_ids=ids).logits[0].float(), -1)
            want = [float(logps[len(prompt) - 1 + i, t]) for i, t in enumerate(gen.token_ids)]
            torch.testing.assert_close(gen.logprobs, want, atol=1e-4, rtol=1e-4)
