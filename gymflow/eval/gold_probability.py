"""How likely a policy finds each task's gold answer: a measure that needs no generation.

For every task, its gold episode as (rendered prompt, gold completion) pairs — one per
assistant turn, the tool outputs of a multi-turn episode in the later prompts, as SFT's
demonstrations are made (:func:`gymflow.train.sft.demonstrations`) — is run through the model
teacher-forced, and the task's score is the **per-token probability** of its gold tokens: the
geometric mean, ``exp(mean log p)``, in [0, 1]. It is what the gate's general-capability check
measures on environments the run does not train on (``GateSettings.general_measure``): a
tool_call start solves no math task (its success there is 0, nothing to lose), yet it gives
math's gold answers some probability, and a candidate that forgets math gives them less.

One forward pass per pair, batched, no sampling: seconds for hundreds of tasks on the default
tiny model. A pair longer than the model's context keeps its completion's first tokens and
the end of its prompt.
"""

from __future__ import annotations

import math


def gold_probabilities(model, tokenizer, tasks: list[list[dict]], batch: int = 16) -> list[float]:
    """Per task (a list of ``{"prompt", "completion"}`` pairs): the per-token probability of
    its gold completions given their prompts; a task without a completion token scores 1.0."""
    import torch

    limit = int(getattr(model.config, "max_position_embeddings", 0) or 4096)
    rows: list[tuple[int, list[int], int]] = []  # (task index, ids, completion length)
    for i, pairs in enumerate(tasks):
        for pair in pairs:
            prompt = tokenizer(pair["prompt"], add_special_tokens=False)["input_ids"]
            completion = tokenizer(pair["completion"], add_special_tokens=False)["input_ids"]
            completion = (
                completion[: max(1, limit // 2)]
                if len(prompt) + len(completion) > limit
                else completion
            )
            prompt = prompt[-(limit - len(completion)) :]
            if completion and prompt:
                rows.append((i, prompt + completion, len(completion)))
    log_p = [0.0] * len(tasks)
    tokens = [0] * len(tasks)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(rows), batch):
                chunk = rows[start : start + batch]
                width = max(len(ids) for _, ids, _ in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for r, (_, seq, _) in enumerate(chunk):
                    ids[r, : len(seq)] = torch.tensor(seq)
                    mask[r, : len(seq)] = 1
                logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
                for r, (task, seq, n) in enumerate(chunk):
                    targets = torch.tensor(seq[-n:], device=device)
                    positions = torch.arange(len(seq) - n - 1, len(seq) - 1, device=device)
                    log_p[task] += float(logp[r, positions, targets].sum())
                    tokens[task] += n
    finally:
        model.train(was_training)
    return [math.exp(lp / n) if n else 1.0 for lp, n in zip(log_p, tokens, strict=True)]
