"""A batch's common prefix computed once in a training forward (SFT's loss, GRPO's demo loss).

Every request of an environment starts the same way: the chat template's system turn and the
tool schemas. On the embedded default 62 of a demonstration's ~109 tokens (a prompt is 73-84)
are that prefix, the same in every row, so a batch of 32 demonstrations runs the same 62 tokens
32 times, forward and backward. :func:`prefix_once` runs them once with a KV cache, repeats the
cache rows for the batch (an index, so the backward sums every row's gradient into the one
prefix pass) and runs each row's rest on top of it: the same loss and gradients as the whole
batch (``tests/test_shared_prefix.py`` compares both), at ~0.57x the time of one SFT step's
forward and backward here (``benchmarks/shared_prefix.py``).

TRL's ``SFTTrainer`` has no option for it (``padding_free`` drops padding, not a repeated
prefix), so :func:`with_shared_prefix` subclasses it and hands its ``compute_loss`` a model
that runs this way; TRL's own loss, token counts and metrics are computed on what it returns.
It steps aside (the plain forward runs) where it cannot help or has not been checked: no
attention mask (padding-free batches), a single row, a common prefix under
:data:`MIN_PREFIX` tokens, inputs other than ids, mask and labels (position ids, an MoE
router's logits), or gradient checkpointing (which turns the KV cache off). GRPO's rollouts
share per-group prompts instead: :mod:`gymflow.train.shared_prompt`.
"""

from __future__ import annotations

from gymflow.policy.cache_names import cache_keyword, returned_cache
from gymflow.policy.transformers_backend import MIN_PREFIX  # the one threshold, as in generation
from gymflow.train.shared_prompt import _checkpointing

FLAGS = frozenset({"use_cache", "fused_lm_head", "return_dict"})
"""Keyword arguments :func:`prefix_once` passes on; any other (position ids, token type ids,
a router's logits) makes it step aside: it has not been checked with them."""


def prefix_cut(input_ids, attention_mask, labels) -> int:
    """How many leading columns every row shares, attended, with no label among them or on
    the column after (its label would be predicted from inside the prefix).

    >>> import torch
    >>> ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 1, 0]])
    >>> mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    >>> prefix_cut(ids, mask, torch.tensor([[-100, -100, -100, -100, 9], [-100] * 3 + [1, -100]]))
    2
    """
    import torch

    same = (input_ids == input_ids[:1]).all(0) & (attention_mask == 1).all(0)
    if labels is not None:
        # the first label column must stay outside the prefix and after its first column
        labelled = (labels != -100).any(0)
        if bool(labelled.any()):
            first = int(torch.nonzero(labelled)[0])
            same[max(first - 1, 0) :] = False
    differs = torch.nonzero(~same)
    return int(differs[0]) if differs.numel() else int(same.numel()) - 1


def prefix_once(model, input_ids, attention_mask, labels=None, **forward_kwargs):
    """The model's output on the batch's columns after its common prefix (labels, losses and
    per-token outputs cover those columns; nothing is labelled inside the prefix), with the
    prefix run once; ``None`` where it steps aside (the module docstring)."""
    import torch

    if (
        attention_mask is None
        or input_ids.size(0) < 2
        or _checkpointing(model)
        or not FLAGS.issuperset(forward_kwargs)
    ):
        return None
    cut = prefix_cut(input_ids, attention_mask, labels)
    if cut < MIN_PREFIX:
        return None
    forward_kwargs.pop("use_cache", None)
    prefix = model(input_ids=input_ids[:1, :cut], use_cache=True, logits_to_keep=1)
    cache = returned_cache(prefix)
    if cache is None:  # a model that keeps no cache in training: the plain forward
        return None
    rows = torch.zeros(input_ids.size(0), dtype=torch.long, device=input_ids.device)
    cache.batch_select_indices(rows)  # differentiable: every row's gradient sums into it
    return model(
        input_ids=input_ids[:, cut:],
        attention_mask=attention_mask,
        labels=None if labels is None else labels[:, cut:],
        use_cache=False,
        **{cache_keyword(model): cache},
        **forward_kwargs,
    )


class _PrefixOnce:
    """A model whose calls run the batch's common prefix once, for TRL's ``compute_loss``."""

    def __init__(self, model):
        self.model = model

    def __call__(self, **inputs):
        out = prefix_once(self.model, **inputs)
        return self.model(**inputs) if out is None else out

    def __getattr__(self, name):
        return getattr(self.model, name)


def with_shared_prefix(trainer_cls):
    """``trainer_cls`` (TRL's SFTTrainer or a subclass) whose loss forward runs each batch's
    common prefix once (:func:`prefix_once`)."""

    class SFTSharedPrefix(trainer_cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.aux_loss_enabled or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            return super().compute_loss(
                _PrefixOnce(model), inputs, return_outputs, num_items_in_batch
            )

    return SFTSharedPrefix
