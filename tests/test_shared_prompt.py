"""The shared-prompt loss forward gives TRL's own log-probs, entropies and gradients.

Real parts: TRL's ``GRPOTrainer`` (its fused LM head and its ``_get_per_token_logps_and_
entropies``) on a tiny transformers Llama, against the same trainer class with
:func:`gymflow.train.shared_prompt.with_shared_prompts`, on a batch laid out as TRL lays out
rollouts: three groups of four samples, prompts of different lengths left-padded, completions
of different lengths right-padded. ``tests/test_grpo_variants.py`` trains with the setting on
and off from the same start to the same weights.
"""

from __future__ import annotations

import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from datasets import Dataset
from gymflow.train.shared_prompt import shared_prompt_logps, with_shared_prompts


def _trainer(cls, model_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=12,
        num_generations=4, report_to="none", max_completion_length=8, bf16=False,
    )  # fmt: skip
    return cls(
        model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=args, train_dataset=Dataset.from_list([{"prompt": "x"}] * 12),
        processing_class=tokenizer,
    )  # fmt: skip


def _batch(vocab: int, pad: int):
    """3 groups × 4 samples: prompts of 5, 9 and 7 tokens (left-padded), completions of 1–6."""
    rng = random.Random(0)
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in (5, 9, 7)]
    width_p, width_c = 9, 6
    ids = torch.full((12, width_p + width_c), pad)
    mask = torch.zeros((12, width_p + width_c), dtype=torch.long)
    for row in range(12):
        p = prompts[row // 4]
        c = [rng.randrange(3, vocab) for _ in range(rng.randint(1, width_c))]
        ids[row, width_p - len(p) : width_p] = torch.tensor(p)
        mask[row, width_p - len(p) : width_p] = 1
        ids[row, width_p : width_p + len(c)] = torch.tensor(c)
        mask[row, width_p : width_p + len(c)] = 1
    return ids, mask, width_c


def _logps_and_grads(trainer, ids, mask, keep):
    model = trainer.model
    model.zero_grad()
    logps, entropy, _ = trainer._get_per_token_logps_and_entropies(
        model, ids, mask, keep, compute_entropy=True
    )
    weights = torch.linspace(-1.0, 1.0, logps.numel()).view_as(logps)
    (logps * weights * mask[:, -keep:]).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logps.detach(), entropy.detach(), grads


def test_shared_prompt_forward_matches_trls(counter_model, tmp_path):
    plain = _trainer(GRPOTrainer, counter_model, tmp_path / "plain")
    shared = _trainer(with_shared_prompts(GRPOTrainer), counter_model, tmp_path / "shared")
    ids, mask, keep = _batch(plain.model.config.vocab_size, plain.processing_class.pad_token_id)
    assert shared_prompt_logps(shared.model, ids, mask, keep, True) is not None  # it ran
    want = _logps_and_grads(plain, ids, mask, keep)
    got = _logps_and_grads(shared, ids, mask, keep)
    on = mask[:, -keep:].bool()
    torch.testing.assert_close(got[0][on], want[0][on], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[1][on], want[1][on], atol=1e-5, rtol=1e-4)
    assert want[2].keys() == got[2].keys() and len(want[2]) > 0
    for name, grad in want[2].items():
        torch.testing.assert_close(got[2][name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_distinct_prompts_fall_back_to_trl(counter_model, tmp_path):
    shared = _trainer(with_shared_prompts(GRPOTrainer), counter_model, tmp_path)
    ids, mask, keep = _batch(shared.model.config.vocab_size, shared.processing_class.pad_token_id)
    rows = torch.tensor([0, 4, 8])  # one sample of each group: nothing to share
    assert shared_prompt_logps(shared.model, ids[rows], mask[rows], keep, True) is None


def test_the_cache_goes_by_the_name_the_forward_takes(counter_model):
    """transformers 5.24 takes the KV cache as ``cache``, earlier 5.x as ``past_key_values``;
    the other name lands in ``**kwargs`` and is ignored (on 5.17 the completions then ran
    without their prompt and the mask's length failed)."""
    from gymflow.policy.cache_names import cache_keyword

    model = AutoModelForCausalLM.from_pretrained(counter_model)
    import inspect

    takes = inspect.signature(model.forward).parameters
    assert cache_keyword(model) == ("cache" if "cache" in takes else "past_key_values")

    class Older(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, past_key_values=None, **kwargs):
            return input_ids

    assert cache_keyword(Older()) == "past_key_values"
