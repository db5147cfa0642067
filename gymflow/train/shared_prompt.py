"""GRPO's loss forward with each group's prompt computed once (``GRPOSettings.share_prompts``).

The G samples of a GRPO group share one prompt, and TRL's loss forward
(``GRPOTrainer._get_per_token_logps_and_entropies``) runs the whole prompt again for every
sample: on the embedded default a prompt is ~76 tokens and a completion ~33, so ~70 % of the
update's rollout tokens are the same prompt eight times over, forward and backward. TRL has no
option for it (its ``padding_free`` is for SFT), so :func:`with_shared_prompts` overrides that
one method: the distinct prompts (all but their last token) go through the model once with a
KV cache, the cache rows are repeated for the samples (an index, so the backward sums the G
samples' gradients into the one prompt pass), and the samples' last prompt token plus
completion run on top of it. Positions, masks and the fused LM head are TRL's, so the log-probs
and gradients are TRL's own (``tests/test_shared_prompt.py`` compares both), at less than half
the loss pass's time on the default (``benchmarks/shared_prompt.py``: 2.17×).

It steps aside (TRL's own method runs) where it cannot help or has not been checked: every prompt
distinct, a vision model's extra inputs, an MoE router's auxiliary loss, or gradient
checkpointing (which turns the KV cache off).
"""

from __future__ import annotations

from gymflow.policy.cache_names import cache_keyword, returned_cache


def shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep: int, entropy: bool):
    """``(log-probs, entropies or None)`` of the last ``logits_to_keep`` tokens of each row,
    with each distinct prompt run once; ``None`` where no two rows share a prompt.

    ``input_ids`` is TRL's ``[prompt (left-padded) | completion (right-padded)]``; the model is
    TRL's, with its fused LM head (``fused_lm_head=True`` returns per-token log-probs).
    """
    import torch

    cut = input_ids.size(1) - logits_to_keep - 1  # the prefix shared by a group: prompt[:-1]
    if cut < 1:
        return None
    prefix = torch.cat([input_ids[:, :cut], attention_mask[:, :cut]], dim=1)
    unique, rows = torch.unique(prefix, dim=0, return_inverse=True)
    if unique.size(0) == input_ids.size(0):
        return None
    first = unique.new_zeros(unique.size(0))
    first[rows] = torch.arange(rows.size(0), device=rows.device)  # one row of each prompt
    prompt = model(
        input_ids=input_ids[first, :cut],
        attention_mask=attention_mask[first, :cut],
        use_cache=True,
        logits_to_keep=1,
    )
    cache = returned_cache(prompt)
    cache.batch_select_indices(rows)  # differentiable: the samples' gradients sum into it
    tail = input_ids[:, cut:]  # the last prompt token (never padding: TRL pads prompts left)
    labels = tail.masked_fill(attention_mask[:, cut:] == 0, -100)
    labels[:, 0] = -100
    out = model(
        input_ids=tail,
        attention_mask=attention_mask,
        **{cache_keyword(model): cache},
        labels=labels,
        fused_lm_head=True,
    )
    logps = out.log_probs[:, -logits_to_keep:]
    return logps, (out.entropy[:, -logits_to_keep:] if entropy else None)


def _checkpointing(model) -> bool:
    """Activation (gradient) checkpointing is on: it turns the KV cache off. A DDP-wrapped
    model answers for the model it wraps."""
    model = getattr(model, "module", model)
    flag = getattr(model, "is_activation_checkpointing", None)
    if flag is None:
        flag = getattr(model, "is_gradient_checkpointing", False)
    return bool(flag)


def with_shared_prompts(trainer_cls):
    """``trainer_cls`` (TRL's GRPOTrainer or a subclass) whose loss forward runs each distinct
    prompt once (:func:`shared_prompt_logps`)."""

    class GRPOSharedPrompts(trainer_cls):
        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **extra,
        ):
            plain = not compute_aux_loss and all(v is None for v in extra.values())
            whole = batch_size is None or batch_size >= input_ids.size(0)
            if plain and whole and not _checkpointing(model):
                with self.accelerator.autocast():
                    got = shared_prompt_logps(
                        model, input_ids, attention_mask, logits_to_keep, compute_entropy
                    )
                if got is not None:
                    return got[0], got[1], None
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size,
                compute_entropy, compute_aux_loss, **extra,
            )  # fmt: skip

    return GRPOSharedPrompts
