"""The transformers policy backend: batched generation with per-token sampling logprobs.

One call generates for many episodes at once (left-padded batches), which is where CPU
throughput comes from (~4,600 tokens/s at batch 64 vs ~280 at batch 1 for the 3.6 M model).
Sampling uses the full distribution (``top_k=0, top_p=1``) so the logprobs returned are the
policy's own, as GRPO's importance ratio assumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    """Completion tokens, ending with EOS when ``finished``."""
    logprobs: list[float]
    text: str
    """Decoded completion without EOS / padding (special tool-call tokens kept)."""
    finished: bool


class Policy(Protocol):
    """What the agent loop needs from a policy backend."""

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]: ...

    def encode_observation(self, output: str) -> list[int]:
        """Token ids of a tool result turn, including the next assistant header."""
        ...

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | None = None,
    ) -> list[Generation]: ...


class TransformersPolicy:
    def __init__(self, model, tokenizer, batch_size: int = 64) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @classmethod
    def from_path(cls, path: str | Path, batch_size: int = 64) -> TransformersPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return cls(model, tokenizer, batch_size)

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return list(ids)

    def encode_observation(self, output: str) -> list[int]:
        text = "\n<|im_start|>tool\n" + output + "<|im_end|>\n<|im_start|>assistant\n"
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | None = None,
    ) -> list[Generation]:
        if seed is not None:
            torch.manual_seed(seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.batch_size):
            out.extend(
                self._batch(
                    prompts[start : start + self.batch_size], max_new_tokens, temperature, greedy
                )
            )
        return out

    def _batch(
        self, prompts: list[list[int]], max_new: int, temperature: float, greedy: bool
    ) -> list[Generation]:
        # A plain KV-cached decode loop instead of ``model.generate``: the same math with less
        # per-token overhead, which dominates at this model size (rollouts are most of a GRPO step).
        width = max(map(len, prompts))
        batch = len(prompts)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        was_training = self.model.training
        self.model.eval()
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1, :]
        next_pos = positions[:, -1:] + 1
        done = torch.zeros(batch, dtype=torch.bool)
        tokens, logps = [], []
        for _ in range(max_new):
            logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), dim=-1)
            tok = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp.gather(-1, tok[:, None]).squeeze(-1))
            done |= tok == self.eos_id
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long)], dim=1)
            out = self.model(
                input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos,
                past_key_values=past, use_cache=True,
            )  # fmt: skip
            past, logits = out.past_key_values, out.logits[:, -1, :]
            next_pos = next_pos + 1
        if was_training:
            self.model.train()
        seqs = torch.stack(tokens, dim=1).tolist()
        chosen = torch.stack(logps, dim=1).tolist()
        gens = []
        for i in range(batch):
            row = seqs[i]
            finished = self.eos_id in row
            n = row.index(self.eos_id) + 1 if finished else len(row)
            body = row[: n - 1] if finished else row[:n]
            text = self.tokenizer.decode(body, skip_special_tokens=False)
            gens.append(Generation(row[:n], chosen[i][:n], text, finished))
        return gens
