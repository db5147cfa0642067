"""An SFT loss on the demonstrations, added to every GRPO step (``GRPOSettings.demo_loss``, on
by default at weight 4; ``null`` turns it off).

On the embedded model GRPO's held-out success stops rising after a few dozen steps while more
SFT over the same demonstrations keeps climbing (``docs/tuning.md``): what the policy still
gets wrong is mostly copying values it has seen in demonstrations, which imitation teaches
faster than the verifier's reward does. Mixing an imitation term into the RL objective (as InstructGPT
mixed its pretraining loss into PPO's) keeps that learning going while the verifier's reward
shapes the rest. The SFT control trains on the same demonstrations, so the comparison stays
fair: the question becomes whether the reward adds anything to imitation.

Each step adds ``weight`` × the mean token NLL of ``batch_size`` demonstrations (the completion
tokens only, as the SFT stage trains) to TRL's GRPO loss. The demonstrations of a step are drawn
by ``(seed, step)``, so a resumed run draws what the first would have. TRL's ``GRPOTrainer``
has no hook for an auxiliary loss, so :func:`with_demo_loss` subclasses it and adds the term in
``compute_loss``. Each batch's common prefix runs once (:mod:`gymflow.train.shared_prefix`,
with ``GRPOSettings.share_prompts``).
"""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from gymflow.train.shared_prefix import prefix_once
from gymflow.train.success_replay import SuccessReplay


class DemoLossSettings(BaseModel):
    """How much imitation each GRPO step mixes in."""

    model_config = {"extra": "forbid"}

    weight: float = Field(4.0, gt=0.0, le=10.0, description="Factor on the demonstrations' NLL.")
    batch_size: int = Field(16, ge=1, description="Demonstrations per GRPO step.")
    success_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of each step's batch drawn from GRPO's own verified successes "
        "(gymflow.train.success_replay; the rest are demonstrations); 0: demonstrations only.",
    )


Row = tuple[list[int], list[int], list[int]]
"""(prompt ids, completion ids, target mask): the loss is on completion tokens whose mask is 1."""


class DemoLoss:
    """The demonstrations, tokenized once; :meth:`loss` is one step's weighted NLL.

    With ``replay`` (and ``settings.success_share`` above 0) part of every batch comes from the
    policy's own verified successes once there are any (:mod:`gymflow.train.success_replay`).
    """

    def __init__(
        self,
        demos: list[dict],
        tokenizer,
        settings: DemoLossSettings,
        seed: int,
        replay: SuccessReplay | None = None,
        share_prefix: bool = True,
    ):
        self.settings, self.seed, self.replay = settings, seed, replay
        self.share_prefix = share_prefix
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.rows: list[Row] = []
        for d in demos:  # prompt and completion tokenized apart, as TRL's SFTTrainer does
            prompt = tokenizer(d["prompt"], add_special_tokens=False)["input_ids"]
            completion = tokenizer(d["completion"], add_special_tokens=False)["input_ids"]
            if completion:
                self.rows.append((prompt, completion, [1] * len(completion)))
        if not self.rows:
            raise ValueError("demo_loss needs at least one demonstration with a completion")

    def batch(self, step: int) -> list[Row]:
        """Step ``step``'s rows: its draw of verified successes, then demonstrations."""
        size = self.settings.batch_size
        own = []
        if self.replay is not None and self.settings.success_share > 0:
            own = self.replay.draw(round(size * self.settings.success_share), step)
        rng = random.Random(f"{self.seed}-{step}-demos")
        demos = [self.rows[rng.randrange(len(self.rows))] for _ in range(size - len(own))]
        return [(s.prompt, s.completion, s.mask) for s in own] + demos

    def loss(self, model, step: int):
        """``weight`` × mean NLL over the target tokens of step ``step``'s rows."""
        import torch

        rows = self.batch(step)
        width = max(len(p) + len(c) for p, c, _ in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (p, c, m) in enumerate(rows):  # right-padded, labels on the targets only
            n = len(p) + len(c)
            ids[i, :n] = torch.tensor(p + c)
            labels[i, len(p) : n] = torch.tensor(
                [t if k else -100 for t, k in zip(c, m, strict=True)]
            )
            mask[i, :n] = 1
        device = next(model.parameters()).device
        ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)
        # the rows' common prefix (system turn, tool schemas) once: the same loss, less compute
        out = prefix_once(model, ids, mask, labels) if self.share_prefix else None
        if out is None:
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        return self.settings.weight * out.loss


def with_demo_loss(trainer_cls, demo_loss: DemoLoss):
    """``trainer_cls`` (TRL's GRPOTrainer) whose loss adds ``demo_loss`` every step."""

    class GRPOWithDemos(trainer_cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            return loss + demo_loss.loss(model, self.state.global_step)

    return GRPOWithDemos
